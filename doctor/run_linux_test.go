//go:build linux

package doctor

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/loader"
)

func TestProbeFrom(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Probe
	}{
		{"usable", nil, Probe{OK: true}},
		{"not in lsm list", fmt.Errorf("bpf-lsm probe: active LSMs are %q: %w", "capability", loader.ErrBPFNotInLSMList),
			Probe{Step: "lsm list"}},
		{"load refused", fmt.Errorf("bpf-lsm probe: load BPF_LSM_MAC program on file_open: %w", fmt.Errorf("load program: %w", unix.EPERM)),
			Probe{Step: "load BPF_LSM_MAC program on file_open", Errno: "EPERM"}},
		{"no probe prefix", fmt.Errorf("audit: open NETLINK_AUDIT socket: %w", unix.EPROTONOSUPPORT),
			Probe{Errno: "EPROTONOSUPPORT"}},
		{"no errno", errors.New("bpf-lsm probe: parse embedded object: bad ELF"), Probe{Step: "parse embedded object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := probeFrom(tt.err)
			if tt.err != nil {
				tt.want.Error = tt.err.Error()
			}
			if got != tt.want {
				t.Errorf("probeFrom(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
}

//go:build linux

package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/loader"
)

// A kernel that refuses BPF-LSM programs with EPERM (a hypervisor sandbox,
// missing capabilities) refuses them for as long as the conditions stay
// the same, and finding out costs every standalone start the parse of the
// kernel's BTF (the probe's attach target) and a refused load: some 20 ms
// of CPU. The Cache remembers that refusal as an empty directory in bpffs
// (which lives one boot), named after a digest of everything the refusal
// could depend on that is cheap to read: the boot, the kernel release, the
// active LSMs, the lockdown state and this process's effective
// capabilities. Any of them changing probes again; only the refusal is
// remembered (a kernel that loads the probe loads the programs, which are
// pinned and reused anyway), so a stale entry can only keep a session on
// the Landlock path, never loosen one. `rm -r <pin dir>/probes` forgets.

// ErrProbeRefusedEarlier wraps the refusal the probe cache remembers.
var ErrProbeRefusedEarlier = errors.New("refused earlier in this boot under the same conditions")

// probeCacher is a Pinning that remembers a refused BPF-LSM probe (Cache).
type probeCacher interface {
	probeBPFLSM() error
}

// probeBPFLSM implements probeCacher: loader.ProbeBPFLSM, or the
// refusal it answered before under the same conditions.
func (c *Cache) probeBPFLSM() error {
	key, err := probeConditions()
	if err != nil {
		return loader.ProbeBPFLSM()
	}
	marker := filepath.Join(c.Dir, "probes", "bpf-lsm-eperm-"+key)
	if _, err := os.Stat(marker); err == nil {
		return fmt.Errorf("bpf-lsm probe: load BPF_LSM_MAC program on file_open: %w (remembered at %s: %w)", ErrProbeRefusedEarlier, marker, unix.EPERM)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return loader.ProbeBPFLSM()
	}
	err = loader.ProbeBPFLSM()
	if errors.Is(err, unix.EPERM) && !errors.Is(err, loader.ErrBPFNotInLSMList) {
		// Not remembering costs the next start the probe, nothing else.
		os.MkdirAll(marker, 0o700)
	}
	return err
}

// probeConditions digests what a refusal of BPF-LSM programs depends on.
func probeConditions() (string, error) {
	h := sha256.New()
	for _, f := range []string{"/proc/sys/kernel/random/boot_id", "/proc/sys/kernel/osrelease",
		"/sys/kernel/security/lsm", "/sys/kernel/security/lockdown"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s=%q\n", f, b)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			fmt.Fprintf(h, "%s\n", line)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

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

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/capset"
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
// The kernel release and the effective capabilities come from uname(2)
// and capget(2), written as /proc/sys/kernel/osrelease and the CapEff
// line of /proc/self/status say them (the digest is the same as when
// those were read): procfs renders the whole status for the one line,
// and each file is an open, a read and a close (~0.1 ms of the start).
func probeConditions() (string, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return "", err
	}
	// This thread's set is the process's: the supervisor never changes
	// one thread's.
	capEff, err := capset.Effective()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, c := range []struct {
		file    string
		content []byte // nil: read from file
	}{
		{file: "/proc/sys/kernel/random/boot_id"},
		{file: "/proc/sys/kernel/osrelease", content: []byte(unix.ByteSliceToString(uts.Release[:]) + "\n")},
		{file: "/sys/kernel/security/lsm"},
		{file: "/sys/kernel/security/lockdown"},
	} {
		b := c.content
		if b == nil {
			if b, err = os.ReadFile(c.file); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(h, "%s=%q\n", c.file, b)
	}
	fmt.Fprintf(h, "CapEff:\t%016x\n", capEff)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

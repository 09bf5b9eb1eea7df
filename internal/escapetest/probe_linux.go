//go:build linux

package escapetest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/landlock"
	"github.com/openoxide/oxsupervise/loader"
)

// Path is the enforcement path `run` takes for the filesystem policy.
type Path string

const (
	// PathLandlock is Landlock with the mount namespace's read-only view,
	// seccomp socket families and the quarantine of protected names.
	PathLandlock Path = "landlock"
	// PathBPFLSM is the BPF-LSM programs, which refuse by inode ancestry
	// and by name at creation.
	PathBPFLSM Path = "bpf-lsm"
)

// Kernel is what the probes found: the expectations of every row derive
// from it (and from what `run` says about its own boundary, see Run).
type Kernel struct {
	Path Path
	// LandlockABI is 0 where Landlock is unusable.
	LandlockABI int
	// SeccompAudited: the kernel audits seccomp's errno actions, which
	// the session's audit log turns into records of layer seccomp.
	SeccompAudited bool
	// CloneIntoCgroup is what clone3(CLONE_INTO_CGROUP) of the cgroup2
	// root gives a uid 0 process without capabilities outside any session
	// (the clone3-into-cgroup op's output; see ProbeCloneIntoCgroup).
	CloneIntoCgroup string
}

// Probe asks the kernel directly: BPF-LSM through doctor's probe program
// (not the layer under test), Landlock's ABI through
// landlock_create_ruleset's version query, seccomp audit through the
// kernel's audit interface and kernel.seccomp.actions_logged.
func Probe() Kernel {
	k := Kernel{Path: PathLandlock}
	if loader.ProbeBPFLSM() == nil {
		k.Path = PathBPFLSM
	}
	if v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno == 0 {
		k.LandlockABI = int(v)
	}
	_, err := os.Stat("/proc/self/loginuid") // CONFIG_AUDIT
	logged, _ := os.ReadFile("/proc/sys/kernel/seccomp/actions_logged")
	k.SeccompAudited = err == nil && strings.Contains(string(logged), "errno")
	return k
}

// landlockAudits: the kernel reports Landlock's own refusals to audit.
func (k Kernel) landlockAudits() bool { return k.LandlockABI >= landlock.AuditABI }

// abstractScoped: Landlock scopes abstract unix sockets (ABI 6).
func (k Kernel) abstractScoped() bool { return k.LandlockABI >= 6 }

// ProbeCloneIntoCgroup runs the clone3-into-cgroup op outside any
// session, from a scratch group, into the cgroup2 root root: the same
// call by the same kind of process (uid 0, no capabilities) as in the
// session, without the session's seccomp filter. Where the kernel moves
// the child it prints childIn+"/"; where it lacks CLONE_INTO_CGROUP
// (before 5.7) an errno.
func ProbeCloneIntoCgroup(t *testing.T, self, root, marker string) string {
	t.Helper()
	g := testutil.NewCgroup(t)
	dir, err := os.Open(g.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(self, testutil.OpArgs(OpName, "clone3-into-cgroup", root, marker)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe clone3(CLONE_INTO_CGROUP) outside any session: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// movesIntoCgroup: the probe saw clone3 start a child in the cgroup2
// root, where a session's process must not get.
func (k Kernel) movesIntoCgroup() bool { return MovedToRoot(k.CloneIntoCgroup) }

// MovedToRoot says whether out, the clone3-into-cgroup op's output, is a
// child started in the cgroup2 root.
func MovedToRoot(out string) bool { return out == childIn+"/" }

func (k Kernel) cloneIntoCgroupSkip() string {
	return fmt.Sprintf("clone3(CLONE_INTO_CGROUP) does not start a child in the cgroup2 root outside any session either (probe: %q): nothing to refuse on this kernel", k.CloneIntoCgroup)
}

//go:build linux

package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// hostTmp is where the guest keeps the host's /tmp visible after it
// mounts its own tmpfs on /tmp: jobs built under the host's /tmp stay
// reachable.
const hostTmp = "/vmtest-host-tmp"

// GuestMain is the guest's PID 1: it prepares the system, runs the jobs in
// jobsPath and powers the VM off. It only returns if power-off fails.
func GuestMain(jobsPath string) {
	s, err := readSpec(jobsPath)
	if err != nil {
		// Without the nonce the host cannot trust any marker: it will see
		// no results and fail the run, which is the right outcome.
		fmt.Printf("vmtest guest: %v\n", err)
		powerOff()
		return
	}
	if err := setupGuest(); err != nil {
		fmt.Println(marker(s.Nonce, "error", strings.ReplaceAll(err.Error(), "\n", " ")))
		powerOff()
		return
	}
	uptime, _ := os.ReadFile("/proc/uptime")
	fmt.Println(marker(s.Nonce, "ready", strings.Fields(string(uptime) + " ?")[0]))
	for _, j := range s.Jobs {
		fmt.Println(marker(s.Nonce, "start", j.Name))
		code := runJob(j)
		fmt.Println(marker(s.Nonce, "exit", j.Name, code))
	}
	unix.Sync()
	fmt.Println(marker(s.Nonce, "done"))
	powerOff()
}

func powerOff() {
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Reaching this means power-off failed; PID 1 exiting panics the
	// kernel, which the host also sees as a failure.
	os.Exit(1)
}

type mountPoint struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

func setupGuest() error {
	const nosuidNodevNoexec = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	early := []mountPoint{
		{"proc", "/proc", "proc", nosuidNodevNoexec, ""},
		{"sysfs", "/sys", "sysfs", nosuidNodevNoexec, ""},
	}
	if err := mountAll(early); err != nil {
		return err
	}
	// Keep the host's /tmp reachable before a guest tmpfs hides it.
	if err := os.MkdirAll(hostTmp, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/tmp", hostTmp, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind host /tmp: %w", err)
	}
	late := []mountPoint{
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", nosuidNodevNoexec, "nsdelegate"},
		{"bpf", "/sys/fs/bpf", "bpf", nosuidNodevNoexec, "mode=0700"},
		{"securityfs", "/sys/kernel/security", "securityfs", nosuidNodevNoexec, ""},
		{"tracefs", "/sys/kernel/tracing", "tracefs", nosuidNodevNoexec, ""},
		{"debugfs", "/sys/kernel/debug", "debugfs", nosuidNodevNoexec, ""},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"},
		{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	}
	if err := mountAll(late); err != nil {
		return err
	}
	if err := os.Symlink("/proc/self/fd", "/dev/fd"); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Symlink("pts/ptmx", "/dev/ptmx"); err != nil && !errors.Is(err, os.ErrExist) {
		os.Remove("/dev/ptmx")
		if err := os.Symlink("pts/ptmx", "/dev/ptmx"); err != nil {
			return err
		}
	}
	if err := unix.Sethostname([]byte("vmtest")); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	return loopbackUp()
}

func mountAll(mounts []mountPoint) error {
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", m.target, err)
		}
		if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for loopback setup: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// guestPath maps a host path to where the guest sees it.
func guestPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/tmp/"); ok {
		return hostTmp + "/" + rest
	}
	return p
}

// guestEnv maps job environment values that are host paths (such as the
// CLI binary built beside the test binaries) to where the guest sees them,
// as guestPath does for the binary and directory: a checkout under the
// host's /tmp would otherwise be hidden by the guest's own tmpfs.
func guestEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			kv = k + "=" + guestPath(v)
		}
		out[i] = kv
	}
	return out
}

func runJob(j Job) int {
	ctx := context.Background()
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, guestPath(j.Binary), j.Args...)
	cmd.Dir = guestPath(j.Dir)
	cmd.Env = append([]string{
		"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"TMPDIR=/tmp",
		"USER=root",
		"LANG=C.UTF-8",
		"OXSUPERVISE_VMTEST=1",
	}, guestEnv(j.Env)...)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stdout
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		fmt.Printf("vmtest guest: %s killed after %s\n", j.Name, j.Timeout)
		return 124
	case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
		return exitErr.ExitCode()
	default:
		fmt.Printf("vmtest guest: %s: %v\n", j.Name, err)
		return 125
	}
}

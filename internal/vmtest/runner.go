package vmtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Config says how to boot the VM.
type Config struct {
	Kernel        Kernel
	Busybox       string        // static busybox for the initramfs; default /bin/busybox
	CacheDir      string        // initramfs cache; must exist or be creatable
	WorkDir       string        // holds the job file; must be on the host root (the guest sees it over 9p)
	GuestProgram  string        // the guest PID 1 (see BuildGuest)
	Qemu          string        // default qemu-system-x86_64
	Memory        string        // default 2G
	CPUs          int           // default 2
	LSM           string        // the lsm= boot parameter; default DefaultLSM(Kernel)
	Timeout       time.Duration // whole run, boot included; default 10m
	BootTimeout   time.Duration // until the guest program is up; default 3m
	ExtraQemuArgs []string      // appended to the qemu command line
	KernelArgs    []string      // appended to the kernel command line (e.g. loglevel=7 to debug boot)
	Output        io.Writer     // guest console; default os.Stdout
}

// DefaultLSM is the lsm= list the guest boots with: Debian's usual active
// LSMs (those the kernel was built with) plus bpf, which Debian's kernel
// builds but may not enable.
func DefaultLSM(k Kernel) string {
	want := []string{"landlock", "lockdown", "yama", "integrity", "apparmor"}
	built := strings.Split(k.ConfigLSM, ",")
	var lsms []string
	for _, name := range want {
		if k.ConfigLSM == "" || slices.Contains(built, name) {
			lsms = append(lsms, name)
		}
	}
	return strings.Join(append(lsms, "bpf"), ",")
}

func (c *Config) setDefaults() {
	if c.Busybox == "" {
		c.Busybox = "/bin/busybox"
	}
	if c.Qemu == "" {
		c.Qemu = "qemu-system-x86_64"
	}
	if c.Memory == "" {
		c.Memory = "2G"
	}
	if c.CPUs == 0 {
		c.CPUs = 2
	}
	if c.LSM == "" {
		c.LSM = DefaultLSM(c.Kernel)
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = 3 * time.Minute
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Output == nil {
		c.Output = os.Stdout
	}
}

// Run boots the VM once, runs every job in order and returns what the
// guest reported. The error is nil only if every job reported the status
// it should and the guest shut down cleanly.
func Run(ctx context.Context, cfg Config, jobs []Job) (Result, error) {
	cfg.setDefaults()
	var res Result
	for _, j := range jobs {
		if strings.ContainsAny(j.Name, " \t\n") {
			return res, fmt.Errorf("job name %q contains whitespace", j.Name)
		}
	}
	initramfs, err := BuildInitramfs(cfg.Kernel, cfg.Busybox, cfg.CacheDir)
	if err != nil {
		return res, fmt.Errorf("build initramfs: %w", err)
	}
	image, err := BootImage(cfg.Kernel, cfg.CacheDir)
	if err != nil {
		return res, err
	}
	nonceBytes := make([]byte, 8)
	rand.Read(nonceBytes)
	nonce := hex.EncodeToString(nonceBytes)
	specPath := filepath.Join(cfg.WorkDir, "jobs.json")
	if err := writeSpec(specPath, spec{Nonce: nonce, Jobs: jobs}); err != nil {
		return res, fmt.Errorf("write job file: %w", err)
	}
	for _, p := range []string{specPath, cfg.GuestProgram} {
		if strings.ContainsAny(p, " \t\n") || !filepath.IsAbs(p) {
			return res, fmt.Errorf("path %q must be absolute and without whitespace: it goes on the kernel command line", p)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmdline := strings.Join([]string{
		"console=ttyS0", "quiet", "panic=-1", "mitigations=off",
		"lsm=" + cfg.LSM,
		"oxs.guest=" + cfg.GuestProgram,
		"oxs.jobs=" + specPath,
	}, " ")
	if len(cfg.KernelArgs) > 0 {
		cmdline += " " + strings.Join(cfg.KernelArgs, " ")
	}
	cmd := exec.CommandContext(ctx, cfg.Qemu,
		"-nodefaults", "-display", "none", "-no-reboot",
		// One host thread for every vCPU: under multi-threaded TCG,
		// the kernel's live patching of its own text (text_poke_bp with
		// int3, when a tracepoint's static key flips) raced another
		// vCPU executing that code, and 6.12 died with "Oops: int3" in
		// syscall_exit_to_user_mode_prepare. Real CPUs do not race so.
		"-accel", "tcg,thread=single", "-cpu", "max",
		"-smp", fmt.Sprint(cfg.CPUs), "-m", cfg.Memory,
		"-kernel", image, "-initrd", initramfs, "-append", cmdline,
		"-serial", "stdio",
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
	)
	cmd.Args = append(cmd.Args, cfg.ExtraQemuArgs...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	cmd.Stderr = cmd.Stdout // qemu's own complaints go through the same reader
	cmd.WaitDelay = 5 * time.Second

	con := newConsole(nonce, jobs, cfg.Output, &res, time.Now)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start %s: %w", cfg.Qemu, err)
	}
	// A guest stuck before its PID 1 starts would otherwise burn the
	// whole run timeout.
	var ready, bootTimedOut atomic.Bool
	con.onReady = func() { ready.Store(true) }
	bootTimer := time.AfterFunc(cfg.BootTimeout, func() {
		if !ready.Load() {
			bootTimedOut.Store(true)
			cmd.Process.Kill()
		}
	})
	defer bootTimer.Stop()
	scanner := bufio.NewScanner(stdout)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		con.line(scanner.Text())
	}
	scanErr := scanner.Err()
	if scanErr != nil {
		// Keep draining so qemu never blocks on a full pipe.
		io.Copy(cfg.Output, stdout)
	}
	waitErr := cmd.Wait()
	res.Total = time.Since(start)
	switch {
	case bootTimedOut.Load():
		res.Failure = fmt.Sprintf("guest did not come up within %s", cfg.BootTimeout)
	case ctx.Err() != nil:
		res.Failure = fmt.Sprintf("timed out after %s", cfg.Timeout)
	case scanErr != nil:
		res.Failure = fmt.Sprintf("reading the guest console: %v", scanErr)
	case waitErr != nil:
		res.Failure = fmt.Sprintf("qemu: %v", waitErr)
	}
	return res, evaluate(jobs, res)
}

// Summary writes one line per job and the timings.
func Summary(w io.Writer, jobs []Job, res Result, runErr error) {
	fmt.Fprintln(w, "vmtest: summary")
	for i, j := range jobs {
		var r JobResult
		if i < len(res.Jobs) { // an error before the boot leaves no results
			r = res.Jobs[i]
		}
		status := "ok"
		switch {
		case !r.Reported:
			status = "NO RESULT"
		case j.ExpectFail && r.Exit != 0:
			status = fmt.Sprintf("ok (self-check failed as it must, exit %d)", r.Exit)
		case j.ExpectFail:
			status = "FAIL (self-check did not fail)"
		case r.Exit != 0:
			status = fmt.Sprintf("FAIL (exit %d)", r.Exit)
		}
		fmt.Fprintf(w, "  %-60s %6.1fs  %s\n", j.Name, r.Duration.Seconds(), status)
	}
	fmt.Fprintf(w, "vmtest: boot %.1fs, total %.1fs\n", res.BootTime.Seconds(), res.Total.Seconds())
	if runErr != nil {
		fmt.Fprintf(w, "vmtest: FAILED:\n%v\n", runErr)
	} else {
		fmt.Fprintln(w, "vmtest: PASS")
	}
}

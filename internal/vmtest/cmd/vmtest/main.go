// Command vmtest builds the test binaries of the given packages and runs
// them all in one boot of the kernel-test VM (see internal/vmtest).
//
//	go run ./internal/vmtest/cmd/vmtest [flags] [--] PACKAGE...
//
// It exits 0 only when every package's tests passed in the guest.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/internal/vmtest"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := pflag.NewFlagSet("vmtest", pflag.ContinueOnError)
	kernelGlob := fs.String("kernel", "/boot/vmlinuz-6.1.*", "kernel image (glob; the newest match is used)")
	runFilter := fs.String("run", "", "passed to the test binaries as -test.run")
	verbose := fs.BoolP("verbose", "v", false, "run the test binaries with -test.v")
	testTimeout := fs.Duration("test-timeout", 5*time.Minute, "per test binary, passed as -test.timeout")
	vmTimeout := fs.Duration("timeout", 12*time.Minute, "the whole VM run, boot included")
	cacheDir := fs.String("cache", ".vmtest", "initramfs cache and build directory")
	memory := fs.String("memory", "2G", "guest memory")
	cpus := fs.Int("cpus", 2, "guest CPUs")
	lsm := fs.String("lsm", "", "lsm= boot parameter (default: the kernel's usual LSMs plus bpf)")
	qemuArgs := fs.StringArray("qemu-arg", nil, "extra qemu argument (repeatable)")
	kernelArgs := fs.StringArray("kernel-arg", nil, "extra kernel command line argument (repeatable), e.g. loglevel=7")
	selfCheck := fs.Bool("self-check", true, "also run a deliberately failing test and require the runner to notice it")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: vmtest [flags] [--] PACKAGE...\n\nRuns the packages' tests in one boot of the kernel-test VM.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		return 2
	}
	pkgs := fs.Args()
	if len(pkgs) == 0 {
		fmt.Fprintln(os.Stderr, "vmtest: no packages given (e.g. vmtest ./loader ./doctor)")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runVM(ctx, pkgs, *kernelGlob, *cacheDir, *memory, *cpus, *lsm, *vmTimeout, *selfCheck, *qemuArgs, *kernelArgs, vmtest.TestOptions{
		Run: *runFilter, Verbose: *verbose, Timeout: *testTimeout,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		return 1
	}
	return 0
}

func runVM(ctx context.Context, pkgs []string, kernelGlob, cacheDir, memory string, cpus int, lsm string,
	timeout time.Duration, selfCheck bool, qemuArgs, kernelArgs []string, opts vmtest.TestOptions) error {
	kernel, err := vmtest.FindKernel(kernelGlob)
	if err != nil {
		return err
	}
	cacheDir, err = filepath.Abs(cacheDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	workDir, err := os.MkdirTemp(cacheDir, "run-")
	if err != nil {
		return fmt.Errorf("create work dir: %w", err)
	}
	defer os.RemoveAll(workDir)

	buildStart := time.Now()
	guest, err := vmtest.BuildGuest(ctx, workDir)
	if err != nil {
		return err
	}
	jobs, err := vmtest.BuildTests(ctx, workDir, pkgs, opts)
	if err != nil {
		return err
	}
	if selfCheck {
		check, err := vmtest.SelfCheckJob(ctx, workDir)
		if err != nil {
			return err
		}
		jobs = append(jobs, check)
	}
	fmt.Printf("vmtest: built %d test binaries in %.1fs; booting %s (%s) with lsm=%s\n",
		len(jobs), time.Since(buildStart).Seconds(), kernel.Image, kernel.Version, lsmOrDefault(lsm, kernel))

	res, runErr := vmtest.Run(ctx, vmtest.Config{
		Kernel:        kernel,
		CacheDir:      cacheDir,
		WorkDir:       workDir,
		GuestProgram:  guest,
		Memory:        memory,
		CPUs:          cpus,
		LSM:           lsm,
		Timeout:       timeout,
		ExtraQemuArgs: qemuArgs,
		KernelArgs:    kernelArgs,
	}, jobs)
	vmtest.Summary(os.Stdout, jobs, res, runErr)
	return runErr
}

func lsmOrDefault(lsm string, k vmtest.Kernel) string {
	if lsm != "" {
		return lsm
	}
	return vmtest.DefaultLSM(k)
}

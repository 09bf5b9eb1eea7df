package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// guestPackage is the guest PID 1.
const guestPackage = "github.com/openoxide/oxsupervise/internal/vmtest/cmd/vmtest-guest"

// BuildGuest builds the guest PID 1 into dir and returns its path.
func BuildGuest(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "vmtest-guest")
	if err := goCommand(ctx, "build", "-o", out, guestPackage); err != nil {
		return "", fmt.Errorf("build guest program: %w", err)
	}
	return out, nil
}

// cliPackage is the oxsupervise command. BuildTests builds it next to
// the test binaries, as building it inside the guest (TCG) is slow, with
// the programs installed beside it (internal/companion): the session
// launcher, which its sessions then use as an installed oxsupervise does.
const cliPackage = "github.com/openoxide/oxsupervise/cmd/oxsupervise"

// cliCompanions are the packages of the programs built beside it, by
// file name.
var cliCompanions = map[string]string{
	"oxsupervise-launch": "github.com/openoxide/oxsupervise/cmd/oxsupervise-launch",
}

// CLIEnv names the environment variable that gives every guest job the
// path of the oxsupervise binary BuildTests built, for tests of the
// command line (`oxsupervise run`) under the VM's kernel.
const CLIEnv = "OXSUPERVISE_VMTEST_CLI"

// errNoTests is returned when none of the requested packages has tests.
var errNoTests = errors.New("none of the packages has test files")

// TestOptions are passed to every test binary.
type TestOptions struct {
	Run     string        // -test.run
	Verbose bool          // -test.v
	Timeout time.Duration // -test.timeout, and the guest's kill timer (plus slack)
	Count   int           // -test.count, 0 = default
}

// BuildTests compiles the test binary of every package in pkgs that has
// tests (static, CGO_ENABLED=0: the guest must not depend on the host's
// dynamic loader setup) into dir, and returns one job per binary.
func BuildTests(ctx context.Context, dir string, pkgs []string, opts TestOptions) ([]Job, error) {
	listArgs := append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{len .TestGoFiles}}\t{{len .XTestGoFiles}}"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", listArgs...)
	cmd.Stderr = os.Stderr
	listing, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(pkgs, " "), err)
	}
	var jobs []Job
	for _, line := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		fields := strings.Split(line, "\t")
		if len(fields) != 4 {
			continue
		}
		importPath, pkgDir := fields[0], fields[1]
		if fields[2] == "0" && fields[3] == "0" {
			fmt.Fprintf(os.Stderr, "vmtest: %s has no test files, skipped\n", importPath)
			continue
		}
		jobs = append(jobs, Job{
			Name:    importPath,
			Binary:  filepath.Join(dir, strings.ReplaceAll(importPath, "/", "_")+".test"),
			Dir:     pkgDir,
			Args:    opts.args(),
			Env:     []string{CLIEnv + "=" + filepath.Join(dir, "oxsupervise")},
			Timeout: opts.Timeout + 30*time.Second,
		})
	}
	// Two builds at a time: each link is single-threaded.
	errs := make([]error, len(jobs)+1)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	if len(jobs) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := goCommand(ctx, "build", "-o", filepath.Join(dir, "oxsupervise"), cliPackage); err != nil {
				errs[len(jobs)] = fmt.Errorf("build the oxsupervise command: %w", err)
				return
			}
			for name, pkg := range cliCompanions {
				if err := goCommand(ctx, "build", "-o", filepath.Join(dir, name), pkg); err != nil {
					errs[len(jobs)] = fmt.Errorf("build %s beside the oxsupervise command: %w", name, err)
					return
				}
			}
		}()
	}
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := goCommand(ctx, "test", "-c", "-o", j.Binary, j.Name); err != nil {
				errs[i] = fmt.Errorf("build test binary of %s: %w", j.Name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, errNoTests
	}
	return jobs, nil
}

func (o TestOptions) args() []string {
	var args []string
	if o.Verbose {
		args = append(args, "-test.v")
	}
	if o.Run != "" {
		args = append(args, "-test.run", o.Run)
	}
	if o.Timeout > 0 {
		args = append(args, "-test.timeout", o.Timeout.String())
	}
	if o.Count > 0 {
		args = append(args, fmt.Sprintf("-test.count=%d", o.Count))
	}
	return args
}

func goCommand(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return nil
}

// selfCheckPackage holds the VM's environment checks and the deliberately
// failing test the runner uses to prove it notices failures.
const selfCheckPackage = "github.com/openoxide/oxsupervise/internal/vmtest/selftest"

// SelfCheckEnv makes selftest.TestDeliberateFailure fail.
const SelfCheckEnv = "OXS_VMTEST_SELF_CHECK"

// SelfCheckJob builds a job that must fail in the guest. Run treats its
// success as a runner failure: a runner that cannot see a failing test
// would report every run green.
func SelfCheckJob(ctx context.Context, dir string) (Job, error) {
	binary := filepath.Join(dir, "vmtest-self-check.test")
	if err := goCommand(ctx, "test", "-c", "-o", binary, selfCheckPackage); err != nil {
		return Job{}, fmt.Errorf("build self-check: %w", err)
	}
	return Job{
		Name:       "vmtest-self-check(must-fail)",
		Binary:     binary,
		Dir:        "/",
		Args:       []string{"-test.v", "-test.run", "^TestDeliberateFailure$"},
		Env:        []string{SelfCheckEnv + "=fail"},
		Timeout:    time.Minute,
		ExpectFail: true,
	}, nil
}

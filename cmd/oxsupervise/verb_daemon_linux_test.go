package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/internal/companion"
)

// `oxsupervise daemon` executes the daemon program found beside it or in
// ../libexec/oxsupervise with its own arguments, and says where it looked
// when there is none or it fails the check. The daemon program here is
// echo(1), which shows the arguments it was given.
func TestDaemonVerbExecutesTheDaemonProgram(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Fatalf("echo(1): %v", err)
	}
	echoBin, err := os.ReadFile(echo)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"daemon", "--socket", "/nonexistent/api.sock", "--max-conns", "3"}
	for _, tc := range []struct {
		name     string
		place    string      // where the daemon program is put, relative to the prefix; "" for nowhere
		mode     os.FileMode // its mode
		code     int
		stdout   string
		inStderr func(prefix string) string
	}{
		{"missing", "", 0, exitFail, "", func(p string) string {
			return "oxsupervise daemon: companion program not found: oxsupervised in " + filepath.Join(p, "bin") + ", " + filepath.Join(p, "libexec/oxsupervise")
		}},
		{"group-writable", "bin", 0o775, exitFail, "", func(p string) string {
			return filepath.Join(p, "bin", companion.Daemon) + ": writable by its group or by others"
		}},
		{"beside oxsupervise", "bin", 0o755, exitOK, strings.Join(args[1:], " ") + "\n", func(string) string { return "" }},
		{"installed in libexec", "libexec/oxsupervise", 0o755, exitOK, strings.Join(args[1:], " ") + "\n", func(string) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := t.TempDir()
			bin := filepath.Join(prefix, "bin", "oxsupervise")
			os.MkdirAll(filepath.Dir(bin), 0o755)
			if err := os.WriteFile(bin, cli, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.place != "" {
				p := filepath.Join(prefix, tc.place, companion.Daemon)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, echoBin, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bin, append([]string{"-test.run=^TestCLIHelperProcess$", "--"}, args...)...)
			cmd.Env = append(os.Environ(), cliAsEnv+"=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.inStderr(prefix)) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want it to say %q)", code, tc.code, stdout.String(), tc.stdout, stderr.String(), tc.inStderr(prefix))
			}
		})
	}
}

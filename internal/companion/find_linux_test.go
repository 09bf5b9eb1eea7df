//go:build linux

package companion

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyTrue puts a copy of true(1) at path with mode.
func copyTrue(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	src, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("true(1): %v", err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestFindIn(t *testing.T) {
	me := os.Geteuid()
	tests := []struct {
		name    string
		setup   func(t *testing.T, first, second string)
		wantDir int    // index of the directory it is found in
		wantErr string // substring of the error, "" for success
	}{
		{"missing everywhere", func(t *testing.T, first, second string) {}, 0, "not found"},
		{"in the executable's directory", func(t *testing.T, first, second string) {
			copyTrue(t, filepath.Join(first, "prog"), 0o755)
			copyTrue(t, filepath.Join(second, "prog"), 0o755)
		}, 0, ""},
		{"in libexec", func(t *testing.T, first, second string) {
			copyTrue(t, filepath.Join(second, "prog"), 0o755)
		}, 1, ""},
		{"a directory", func(t *testing.T, first, second string) {
			os.Mkdir(filepath.Join(first, "prog"), 0o755)
		}, 0, "not a regular file"},
		{"not executable", func(t *testing.T, first, second string) {
			copyTrue(t, filepath.Join(first, "prog"), 0o644)
		}, 0, "not executable"},
		{"group-writable, and a good one further on is not used", func(t *testing.T, first, second string) {
			copyTrue(t, filepath.Join(first, "prog"), 0o775)
			copyTrue(t, filepath.Join(second, "prog"), 0o755)
		}, 0, "writable by its group or by others"},
		{"world-writable", func(t *testing.T, first, second string) {
			copyTrue(t, filepath.Join(first, "prog"), 0o757)
		}, 0, "writable by its group or by others"},
	}
	if me == 0 {
		tests = append(tests, struct {
			name    string
			setup   func(t *testing.T, first, second string)
			wantDir int
			wantErr string
		}{"owned by another user", func(t *testing.T, first, second string) {
			p := filepath.Join(first, "prog")
			copyTrue(t, p, 0o755)
			if err := os.Chown(p, 54321, 54321); err != nil {
				t.Fatal(err)
			}
		}, 0, "owned by uid 54321"})
	} else {
		t.Log("SKIPPED case \"owned by another user\": needs root to chown")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs := []string{t.TempDir(), t.TempDir()}
			tt.setup(t, dirs[0], dirs[1])
			p, err := FindIn("prog", dirs, me)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FindIn: err = %v, want one saying %q", err, tt.wantErr)
				}
				if tt.wantErr == "not found" && !errors.Is(err, ErrNotFound) {
					t.Fatalf("FindIn: err = %v, want ErrNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FindIn: %v", err)
			}
			defer p.Close()
			if want := filepath.Join(dirs[tt.wantDir], "prog"); p.Path != want {
				t.Fatalf("found %s, want %s", p.Path, want)
			}
		})
	}
}

// The checked file is the one that runs: a file put at its path after the
// check is not executed.
func TestExecPathRunsTheCheckedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prog")
	copyTrue(t, path, 0o755)
	p, err := FindIn("prog", []string{dir}, os.Geteuid())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Swap in a program that fails.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: ExecPath(3), Args: []string{"prog"}, ExtraFiles: []*os.File{p.File}}
	if err := cmd.Run(); err != nil {
		t.Fatalf("run the checked file through %s: %v (the swapped-in one exits 7)", ExecPath(3), err)
	}
}

func TestDirs(t *testing.T) {
	got := Dirs("/usr/local/bin/oxsupervise")
	want := []string{"/usr/local/bin", "/usr/local/libexec/oxsupervise"}
	if strings.Join(got, ":") != strings.Join(want, ":") {
		t.Fatalf("Dirs = %v, want %v", got, want)
	}
}

//go:build unix

package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// The traps below each stop the bind step: a protected name deep below a
// writable root that is a dangling symlink (only the scan finds it), a
// writable root that is a FIFO, a deny_read path below a symlink loop. Only
// a walk or a lookup of those paths notices any of them.
var traps = []struct {
	name string
	// config is the user layer; root is substituted for $ROOT.
	config string
	want   string
}{
	{"dangling protected name", "", "a/b/c/d/.claude: protected name is a dangling symlink"},
	{"FIFO writable root", "[sandbox]\nwritable_roots = [\"$ROOT/fifo\"]\n", "$ROOT/fifo) is not an existing directory"},
	// read-only: no writable root is scanned, so the dangling name
	// does not stop Bind first.
	{"looping deny_read", "[sandbox]\nmode = \"read-only\"\ndeny_read = [\"$ROOT/loop/x\"]\n", "deny_read $ROOT/loop/x: "},
}

func trapWorkspace(t *testing.T, f *fixture, config string) {
	t.Helper()
	deep := f.mkdir(t, "ws/a/b/c/d")
	if err := os.Symlink(filepath.Join(f.root, "nowhere"), filepath.Join(deep, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(f.root, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	f.write(t, "home/.openoxide/config.toml", strings.ReplaceAll(config, "$ROOT", f.root)+`[[permissions.rules]]
tool = "bash"
pattern = "rm *"
action = "deny"
`)
}

func (f *fixture) resolve(t *testing.T) (*Resolved, string, error) {
	t.Helper()
	var warn bytes.Buffer
	r, _, err := Resolve(LoadOptions{
		ManagedDir: f.managed,
		Home:       f.home,
		Workspace:  f.ws,
		Env:        func(k string) string { return f.env[k] },
		Warn:       &warn,
	})
	return r, warn.String(), err
}

// TestResolveDoesNotLookAtPolicyPaths: the resolve step answers permission
// questions for a workspace whose paths the bind step refuses, so it has
// neither walked the writable roots nor looked up the roots or deny_read.
func TestResolveDoesNotLookAtPolicyPaths(t *testing.T) {
	for _, tt := range traps {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			trapWorkspace(t, f, tt.config)
			r, warn, err := f.resolve(t)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if warn != "" {
				t.Errorf("Resolve warned: %q", warn)
			}
			if d := r.Permissions.Check("bash", "ls && rm -rf x", ""); d.Action != ActionDeny {
				t.Errorf("Check = %s, want deny", d.Action)
			}
			// The trap stops Bind (and Load), which is what shows Resolve
			// stepped past it without looking.
			want := strings.ReplaceAll(tt.want, "$ROOT", f.root)
			if _, err := r.Bind(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Bind: %v, want an error containing %q", err, want)
			}
			if _, _, _, err := f.load(t); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load: %v, want an error containing %q", err, want)
			}
		})
	}
}

// TestLoadIsResolveThenBind: Load and the two steps give the same policy.
func TestLoadIsResolveThenBind(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "ws/.git/hooks")
	f.mkdir(t, "home/.ssh")
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nprotected_subpaths = [\"deploy\", \"~/keys\"]\nread_only_access = \"restricted\"\nreadable_roots = [\".\"]\n")
	want, _, _ := f.mustLoad(t)
	r, _, err := f.resolve(t)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := r.Bind()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Bind = %+v\nLoad = %+v", got, want)
		}
	}
}

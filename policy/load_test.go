package policy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// fixture is a throw-away managed dir, home and workspace.
type fixture struct {
	root, managed, home, ws string
	env                     map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	f := &fixture{root: root, managed: filepath.Join(root, "etc"), home: filepath.Join(root, "home"), ws: filepath.Join(root, "ws"), env: map[string]string{}}
	for _, d := range []string{f.managed, f.home, f.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// write creates root/rel (rel may start with etc/, home/, ws/).
func (f *fixture) write(t *testing.T, rel, content string) string {
	t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) mkdir(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) load(t *testing.T, args ...string) (*Compiled, *Effective, string, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fl := RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse flags %v: %v", args, err)
	}
	var warn bytes.Buffer
	c, e, err := Load(LoadOptions{
		ManagedDir: f.managed,
		Home:       f.home,
		Workspace:  f.ws,
		Flags:      fl,
		Env:        func(k string) string { return f.env[k] },
		Warn:       &warn,
	})
	return c, e, warn.String(), err
}

func (f *fixture) mustLoad(t *testing.T, args ...string) (*Compiled, *Effective, string) {
	t.Helper()
	c, e, w, err := f.load(t, args...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c, e, w
}

func paths(as []Anchor) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Path)
	}
	return out
}

func effValue(e *Effective, key string) (EffectiveValue, bool) {
	for _, v := range e.Values {
		if v.Key == key {
			return v, true
		}
	}
	return EffectiveValue{}, false
}

// TestErrors checks each error shape: file:line:col, message, hint.
func TestErrors(t *testing.T) {
	tests := []struct {
		name, file, toml string
		at               string // "line:col"
		msg, hint        string
	}{
		{"syntax", "home", "[sandbox\nmode = 1\n", "1:9", "invalid TOML", "toml.io"},
		{"duplicate key", "home", "[sandbox]\nmode = \"read-only\"\nmode = \"read-only\"\n", "3:1", "invalid TOML", ""},
		{"unknown table", "home", "[sandbx]\nmode = \"read-only\"\n", "1:2", "unknown key sandbx", "did you mean \"sandbox\"?"},
		{"unknown key", "home", "[sandbox]\nmod = \"read-only\"\n", "2:1", "unknown key sandbox.mod", "did you mean \"mode\"?"},
		{"unknown dotted key", "home", "sandbox.modez = \"x\"\n", "1:9", "unknown key sandbox.modez", "did you mean \"mode\"?"},
		{"wrong type", "home", "[sandbox]\nmode = 3\n", "2:8", "sandbox.mode must be a string, not an integer", ""},
		{"wrong list type", "home", "[sandbox]\nwritable_roots = \"/x\"\n", "2:18", "must be an array of strings", ""},
		{"wrong element type", "home", "[sandbox]\nwritable_roots = [\"/x\", 3]\n", "2:25", "sandbox.writable_roots[1] must be a string", ""},
		{"bad enum", "home", "[sandbox]\nmode = \"yolo\"\n", "2:8", "bad value for sandbox.mode: \"yolo\"", "one of: read-only"},
		{"bad net entry", "home", "[network]\nallow = [\"ok.com\", \"10.0.0.0/33\"]\n", "2:20", "bad value for network.allow", "entries look like"},
		{"bad wildcard", "home", "[network]\nallow = [\"a.*.com\"]\n", "2:10", "wildcards are only allowed", ""},
		{"bad port", "home", "[network]\nallow = [\"x.com:0\"]\n", "2:10", "bad port", ""},
		{"bad size", "home", "[limits]\nmemory_max = \"lots\"\n", "2:14", "is not a size", ""},
		{"negative", "home", "[limits]\npids_max = -1\n", "2:12", "is negative", "0 for unlimited"},
		{"kernel buffer not a power of two", "home", "[audit]\nkernel_buffer = \"3M\"\n", "2:17", "bad value for audit.kernel_buffer: 3145728 bytes is not a power of two", "e.g. \"16M\""},
		{"kernel buffer too small", "home", "[audit]\nkernel_buffer = 4096\n", "2:17", "from 64K to 1G", ""},
		{"not a table", "home", "sandbox = 1\n", "1:11", "sandbox must be a table", ""},
		{"network shorthand type", "home", "[sandbox]\nnetwork = \"yes\"\n", "2:11", "must be a boolean", ""},
		{"network twice", "home", "[sandbox]\nnetwork = true\n[network]\npolicy = \"none\"\n", "2:1", "sandbox.network and network.policy are both set", "keep one"},
		{"rule without action", "home", "[[permissions.rules]]\ntool = \"bash\"\n", "1:15", "needs both tool and action", ""},
		{"rule bad action", "home", "[[permissions.rules]]\ntool = \"bash\"\naction = \"maybe\"\n", "3:10", "bad value for permissions.rules[0].action", "allow, deny, ask"},
		{"rule unknown key", "home", "[[permissions.rules]]\ntool = \"bash\"\naction = \"deny\"\npatern = \"x\"\n", "4:1", "unknown key permissions.rules[0].patern", "did you mean \"pattern\"?"},
		{"rule bad glob", "home", "[[permissions.rules]]\ntool = \"read\"\npattern = \"[x\"\naction = \"deny\"\n", "3:11", "not a valid glob", ""},
		{"agent unknown", "home", "[agent.x.perms]\ndefault = \"ask\"\n", "1:10", "unknown key agent.x.perms", "permission"},
		{"locks outside managed", "home", "[managed]\nlocked = [\"sandbox\"]\n", "2:1", "only honoured in managed policy", "policy.d"},
		{"unknown lock", "etc", "[managed]\nlocked = [\"sandbox.nope\"]\n", "2:11", "bad value for managed.locked", "one of:"},
		{"tilde user", "home", "[sandbox]\nwritable_roots = [\"~bob/x\"]\n", "2:19", "only ~ and ~/... are expanded", ""},
		{"dotdot protected", "home", "[sandbox]\nprotected_subpaths = [\"../x\"]\n", "2:23", "\"..\" is not allowed", ""},
		{"bad env glob", "home", "[env]\npassthrough = [\"A-B\"]\n", "2:16", "environment names", ""},
		{"empty excluded command", "home", "[sandbox]\nexcluded_commands = [\" \"]\n", "2:22", "must not be empty", ""},
		{"workspace config", "ws", "[sandbox]\nmode = \"nope\"\n", "2:8", "bad value for sandbox.mode", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			rel := map[string]string{"home": "home/.openoxide/config.toml", "etc": "etc/policy.toml", "ws": "ws/.openoxide/config.toml"}[tt.file]
			p := f.write(t, rel, tt.toml)
			_, _, _, err := f.load(t)
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			if want := p + ":" + tt.at + ": "; !strings.HasPrefix(msg, want) {
				t.Errorf("error %q\n does not start with %q", msg, want)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("error %q lacks %q", msg, tt.msg)
			}
			if tt.hint != "" && !strings.Contains(msg, "hint: ") || !strings.Contains(msg, tt.hint) {
				t.Errorf("error %q lacks hint %q", msg, tt.hint)
			}
		})
	}
}

func TestDeterministicJSON(t *testing.T) {
	f := newFixture(t)
	f.write(t, "home/.openoxide/config.toml", "[network]\npolicy = \"allowlist\"\nallow = [\"b.com\", \"10.0.0.0/8:443\", \"[2001:db8::1]:22\"]\n[agent.a.permission]\ndefault = \"deny\"\n[agent.b.permission]\ndefault = \"allow\"\n")
	f.mkdir(t, "ws/.git/hooks")
	c1, _, _ := f.mustLoad(t)
	c2, _, _ := f.mustLoad(t)
	d1, err := c1.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := c2.Digest()
	if d1 != d2 || !strings.HasPrefix(d1, "sha256:") {
		t.Errorf("digests differ: %s %s", d1, d2)
	}
	b, err := json.Marshal(c1)
	if err != nil {
		t.Fatal(err)
	}
	var back Compiled
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if string(b2) != string(b) {
		t.Errorf("JSON round trip changed the policy\n got %s\nwant %s", b2, b)
	}
	if !reflect.DeepEqual(back.Network.Allow[1].Prefix, c1.Network.Allow[1].Prefix) || back.Network.Allow[0].Host != "b.com" {
		t.Errorf("network entries lost in round trip: %+v", back.Network.Allow)
	}
	d3, _ := back.Digest()
	if d3 != d1 {
		t.Errorf("digest after round trip %s != %s", d3, d1)
	}
}

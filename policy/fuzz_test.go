package policy

import (
	"errors"
	"strings"
	"testing"
)

// FuzzLoadTOML feeds arbitrary bytes to the loader as the user config: it
// must either load or fail with a positioned *Error, never panic.
func FuzzLoadTOML(f *testing.F) {
	for _, s := range []string{
		"[sandbox]\nmode = \"workspace-write\"\nwritable_roots = [\"~/x\"]\nnetwork = false\n",
		"[network]\npolicy = \"allowlist\"\nallow = [\"github.com\", \"*.npmjs.org\", \"10.0.0.0/8:443\"]\nloopback = \"session\"\n",
		"[[permissions.rules]]\ntool = \"bash\"\npattern = \"git *\"\naction = \"allow\"\n",
		"[agent.build.permission]\ndefault = \"ask\"\n[[agent.build.permission.rules]]\ntool=\"bash\"\naction=\"deny\"\n",
		"sandbox.mode = 3\n",
		"[limits]\nmemory_max = \"2G\"\npids_max = 10\n",
		"a = {b = [1, {c = 2}]}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The pure path (parse, decode, merge under a lock) runs on every
		// input; the filesystem compile is covered by the unit tests.
		d, err := parseTOML("fuzz.toml", data)
		if err != nil {
			requirePositioned(t, err)
			return
		}
		for _, managed := range []bool{true, false} {
			l, err := decodeLayer(d, managed)
			if err != nil {
				requirePositioned(t, err)
				continue
			}
			m := newMerged()
			if !managed {
				m.locks["sandbox.mode"] = pos{File: "lock"}
				m.seal()
			}
			if err := m.apply(l); err != nil {
				requirePositioned(t, err)
				continue
			}
			if e := m.effective(); len(e.Values) < len(defaults()) {
				t.Fatalf("effective lost keys: %d", len(e.Values))
			}
		}
	})
}

func requirePositioned(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error is not a positioned *Error: %v", err)
	}
	if pe.Pos.File != "fuzz.toml" || !strings.HasPrefix(err.Error(), "fuzz.toml") {
		t.Fatalf("error does not name the file: %v", err)
	}
}

// FuzzSplitBash checks that no command line crashes the splitter or the
// permission check, and that a command containing `rm` as a simple
// command is never allowed when `rm *` is denied.
func FuzzSplitBash(f *testing.F) {
	for _, s := range []string{
		"ls && rm -rf ~", "echo $(curl x)", "a | b; c || d", "(x) & y", "diff <(a) >(b)",
		"bash -c 'eval \"rm x\"'", "f() { g; }; f", "sudo env A=1 timeout 3 nice -n 5 rm x",
		"echo 'unterminated", "${a:-$(b)}", "cat <<EOF\n$(rm x)\nEOF\n", "coproc rm x",
	} {
		f.Add(s)
	}
	perms := Permissions{Default: ActionAllow, Rules: []PermissionRule{{Tool: "bash", Pattern: "rm *", Action: ActionDeny}}}
	f.Fuzz(func(t *testing.T, src string) {
		cmds, err := SplitBashWords(src)
		d := perms.Check("bash", src, "")
		if err != nil {
			if d.Action == ActionAllow {
				t.Fatalf("unparsable %q allowed", src)
			}
			return
		}
		for _, w := range cmds {
			if len(w) > 0 && w[0] == "rm" && d.Action != ActionDeny {
				t.Fatalf("%q contains rm but was judged %s", src, d.Action)
			}
		}
	})
}

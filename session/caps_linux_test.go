//go:build linux

package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunCapabilities proves that a session has no capabilities, root
// included, unless its policy keeps one by name: the five sets in
// /proc/self/status, and what root can no longer do (chown a file, bind a
// port below 1024); with sandbox.capabilities the named ones are back,
// for root and for another user alike, and nothing else.
func TestRunCapabilities(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	caps := filepath.Join(e.base, "caps.toml")
	mustWrite(t, caps, "[sandbox]\ncapabilities = [\"CAP_CHOWN\", \"CAP_NET_BIND_SERVICE\"]\n")
	// Both users create files here (root without CAP_DAC_OVERRIDE
	// cannot write into a directory another user owns).
	if err := os.Chmod(e.ws, 0o777); err != nil {
		t.Fatal(err)
	}
	const kept = 1<<unix.CAP_CHOWN | 1<<unix.CAP_NET_BIND_SERVICE
	for _, tc := range []struct {
		name     string
		args     []string
		uid      int
		eff, amb uint64
		chown    string // chown of a file the session created
		bindLow  string // bind 127.0.0.1:80 in the session's network namespace
	}{
		{"root", nil, 0, 0, 0, "EPERM", "EACCES"},
		{"nobody", []string{"--user", "65534"}, 65534, 0, 0, "EPERM", "EACCES"},
		{"root-kept", []string{"--config", caps}, 0, kept, 0, "OK", "OK"},
		{"nobody-kept", []string{"--config", caps, "--user", "65534"}, 65534, kept, kept, "OK", "OK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := "owned-" + tc.name
			// chown to 65534 from root, to root from nobody: a change
			// only CAP_CHOWN allows either way.
			target := "65534"
			if tc.uid != 0 {
				target = "0"
			}
			script := fmt.Sprintf(`grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; : > %s; printf 'chown='; chown %s %s 2>/dev/null && echo OK || echo EPERM; printf 'bind='; "$FSOP" bind 127.0.0.1:80`, file, target, file)
			args := append(append([]string{"run"}, tc.args...), "--", "sh", "-c", script)
			r := e.run(t, nil, args...)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			got := map[string]string{}
			for _, l := range strings.Split(r.stdout, "\n") {
				if k, v, ok := strings.Cut(l, ":\t"); ok {
					got[k] = v
				} else if k, v, ok := strings.Cut(l, "="); ok {
					got[k] = v
				}
			}
			want := map[string]string{
				"CapInh": fmt.Sprintf("%016x", tc.eff), "CapPrm": fmt.Sprintf("%016x", tc.eff), "CapEff": fmt.Sprintf("%016x", tc.eff),
				"CapBnd": fmt.Sprintf("%016x", tc.eff), "CapAmb": fmt.Sprintf("%016x", tc.amb), "chown": tc.chown, "bind": tc.bindLow,
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s = %q, want %q\nstdout %s", k, got[k], w, r.stdout)
				}
			}
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(e.ws, file), &st); err != nil {
				t.Fatal(err)
			}
			wantOwner := tc.uid
			if tc.chown == "OK" {
				wantOwner = map[int]int{0: 65534, 65534: 0}[tc.uid]
			}
			if int(st.Uid) != wantOwner {
				t.Errorf("%s owned by %d after the session, want %d", file, st.Uid, wantOwner)
			}
		})
	}
}

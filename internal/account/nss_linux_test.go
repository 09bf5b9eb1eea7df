package account

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// nssHelperEnv makes the test binary the child of TestLookupNSSOnlyUser
// (TestMain): it names the directory holding the child's user databases.
const nssHelperEnv = "OXS_ACCOUNT_NSS_HELPER"

// extrausersModule is where Debian's libnss-extrausers installs its
// module (make deps installs the package); it reads
// /var/lib/extrausers/{passwd,group}, no server needed.
var extrausersModules = []string{"/usr/lib/libnss_extrausers.so.2", "/usr/lib/x86_64-linux-gnu/libnss_extrausers.so.2", "/lib/x86_64-linux-gnu/libnss_extrausers.so.2"}

func TestMain(m *testing.M) {
	if dir := os.Getenv(nssHelperEnv); dir != "" {
		os.Exit(nssHelper(dir))
	}
	os.Exit(m.Run())
}

// The child's databases: one user in the files, one only in the
// extrausers module, and a group of the module that both are members of.
const (
	filesPasswd = "root:x:0:0:root:/root:/bin/sh\noxs-files:x:54330:54330:files user:/home/oxs-files:/bin/sh\n"
	filesGroup  = "root:x:0:\noxs-files:x:54330:\n"
	extraPasswd = "oxs-nss-only:x:54321:54321:NSS only:/home/oxs-nss-only:/bin/sh\n"
	extraGroup  = "oxs-nss-only:x:54321:\noxs-nss-extra:x:54322:oxs-nss-only,oxs-files\n"
	nsswitch    = "passwd: files extrausers\ngroup: files extrausers\n"
)

// nssResult is one lookup's outcome as the child reports it.
type nssResult struct {
	User    *User  `json:",omitempty"`
	Err     string `json:",omitempty"`
	Unknown bool   `json:",omitempty"` // Err wraps os/user's unknown-user error
}

var nssSpecs = []string{"oxs-nss-only", "54321", "oxs-files", "54330", "oxs-nobody-here", "54399"}

// nssHelper runs in a mount namespace of its own (Unshareflags): it binds
// dir's files over the machine's user databases and nsswitch.conf, so
// the machine's own are never changed, and prints each spec's lookup
// through Lookup (os/user first, whatever this build's os/user is) and
// through a resolver whose os/user knows nobody (every answer from NSS,
// what a static build gets for a user outside /etc/passwd).
func nssHelper(dir string) int {
	for _, b := range [][2]string{
		{"nsswitch.conf", "/etc/nsswitch.conf"}, {"passwd", "/etc/passwd"}, {"group", "/etc/group"},
		{"extrausers", "/var/lib/extrausers"},
	} {
		if err := syscall.Mount(filepath.Join(dir, b[0]), b[1], "", syscall.MS_BIND, ""); err != nil {
			fmt.Fprintf(os.Stderr, "bind %s over %s: %v\n", b[0], b[1], err)
			return 1
		}
	}
	if passwd, err := os.ReadFile("/etc/passwd"); err != nil || strings.Contains(string(passwd), "oxs-nss-only") {
		fmt.Fprintf(os.Stderr, "/etc/passwd holds the NSS-only user or is unreadable (%v)\n", err)
		return 1
	}
	nssOnly, release := systemResolver()
	defer release()
	nssOnly.byName = func(s string) (*user.User, error) { return nil, user.UnknownUserError(s) }
	nssOnly.byID = func(s string) (*user.User, error) { return nil, user.UnknownUserIdError(0) }
	out := map[string][2]nssResult{}
	for _, spec := range nssSpecs {
		var r [2]nssResult
		for i, lookup := range []func(string) (*User, error){Lookup, nssOnly.lookup} {
			u, err := lookup(spec)
			r[i].User = u
			if err != nil {
				var a user.UnknownUserError
				var b user.UnknownUserIdError
				r[i].Err, r[i].Unknown = err.Error(), errors.As(err, &a) || errors.As(err, &b)
			}
		}
		out[spec] = r
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestLookupNSSOnlyUser: a user that only an NSS module knows (not
// /etc/passwd) is found, with its home and the module's groups, and a
// files user gets its groups from the module too; unknown users are
// os/user's unknown-user errors. The module is Debian's extrausers, set
// up in a mount namespace of the test's own.
func TestLookupNSSOnlyUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PASSED: binding the test's user databases over the machine's needs root")
	}
	if getent, err := openGetent(); err != nil {
		t.Fatalf("glibc's getent: %v", err)
	} else {
		getent.Close()
	}
	found := false
	for _, p := range extrausersModules {
		if _, err := os.Stat(p); err == nil {
			found = true
		}
	}
	if !found {
		t.Skipf("SKIPPED, NOT PASSED: libnss-extrausers is not installed (%s); `make deps` installs it", strings.Join(extrausersModules, ", "))
	}
	if fi, err := os.Stat("/var/lib/extrausers"); err != nil || !fi.IsDir() {
		t.Fatalf("libnss-extrausers is installed but /var/lib/extrausers is not a directory: %v", err)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"nsswitch.conf": nsswitch, "passwd": filesPasswd, "group": filesGroup,
		"extrausers/passwd": extraPasswd, "extrausers/group": extraGroup,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nssHelperEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child in its own mount namespace: %v\n%s", err, stderr.String())
	}
	var got map[string][2]nssResult
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("the child's answer %q: %v", stdout, err)
	}
	nssOnly := &User{Name: "oxs-nss-only", UID: 54321, GID: 54321, Home: "/home/oxs-nss-only", Groups: []int{54321, 54322}}
	files := &User{Name: "oxs-files", UID: 54330, GID: 54330, Home: "/home/oxs-files", Groups: []int{54330, 54322}}
	for _, tc := range []struct {
		spec string
		want *User
		err  string
	}{
		{"oxs-nss-only", nssOnly, ""},
		{"54321", nssOnly, ""},
		{"oxs-files", files, ""},
		{"54330", files, ""},
		{"oxs-nobody-here", nil, `user "oxs-nobody-here": user: unknown user oxs-nobody-here`},
		{"54399", nil, `user "54399": user: unknown userid 54399`},
	} {
		for i, via := range []string{"Lookup", "NSS alone"} {
			r := got[tc.spec][i]
			if tc.want != nil {
				if r.Err != "" || !reflect.DeepEqual(r.User, tc.want) {
					t.Errorf("%s(%q) = %+v, %q; want %+v", via, tc.spec, r.User, r.Err, tc.want)
				}
				continue
			}
			if r.User != nil || r.Err != tc.err || !r.Unknown {
				t.Errorf("%s(%q) = %+v, %q (unknown-user error: %v); want only the unknown-user error %q", via, tc.spec, r.User, r.Err, r.Unknown, tc.err)
			}
		}
	}
}

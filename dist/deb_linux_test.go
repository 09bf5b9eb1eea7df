package dist

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/internal/clidoc"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// need skips loudly when a tool the step needs is not installed (make
// deps installs every one of them).
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED, NOT PASSED: %s is not installed (make deps installs it)", tool)
		}
	}
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildDeb runs make deb into a temporary directory and returns the path.
func buildDeb(t *testing.T) string {
	t.Helper()
	out := run(t, []string{"DEBDIR=" + t.TempDir()}, "make", "--no-print-directory", "-C", "..", "deb")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	deb := lines[len(lines)-1]
	if !strings.HasSuffix(deb, ".deb") {
		t.Fatalf("make deb did not print the package path:\n%s", out)
	}
	return deb
}

// scratchRoot is an empty root with a dpkg database.
func scratchRoot(t *testing.T) string {
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// dpkg runs dpkg on the scratch root. The maintainer scripts run outside
// a chroot with $DPKG_ROOT set (the root has no shell); the dependencies
// (libc6, init-system-helpers) are the host's, not in the root's database.
func dpkg(t *testing.T, root string, args ...string) string {
	t.Helper()
	return run(t, nil, "dpkg", append([]string{"--root=" + root, "--force-script-chrootless", "--force-depends", "--force-confold"}, args...)...)
}

// script runs one installed maintainer script as dpkg would.
func script(t *testing.T, root, path string, args ...string) {
	t.Helper()
	run(t, []string{"DPKG_ROOT=" + root, "DPKG_MAINTSCRIPT_PACKAGE=oxsupervise"}, path, args...)
}

// snapshot describes every file under root except dpkg's database:
// type, mode, owner, symlink target and content digest.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "var/lib/dpkg" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		out["/"+rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(t *testing.T, step string, before, after map[string]string) {
	t.Helper()
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if before[k] != after[k] {
			t.Errorf("%s changed %s: %q -> %q", step, k, before[k], after[k])
		}
	}
}

// TestDebPackage builds the package with make deb, checks it with lintian,
// installs it into a scratch root with dpkg, and checks every file, mode
// and conffile, the unit, the man pages, the completions, and that the
// maintainer scripts can run again (and an upgrade over the same version)
// without changing anything; then removal and purge.
func TestDebPackage(t *testing.T) {
	testutil.RequireRoot(t)
	need(t, "make", "dpkg", "dpkg-deb", "dpkg-shlibdeps", "deb-systemd-helper")
	deb := buildDeb(t)

	t.Run("lintian", func(t *testing.T) {
		need(t, "lintian")
		// Warnings count as failures; informational tags (Go binaries have
		// no _FORTIFY_SOURCE functions) do not.
		out := run(t, nil, "lintian", "--fail-on", "error,warning", "--tag-display-limit", "0", deb)
		t.Logf("lintian:\n%s", out)
	})

	root := scratchRoot(t)
	dpkg(t, root, "-i", deb)
	installed := snapshot(t, root)

	// The installed binary's own verb table names the pages to expect.
	cli, err := clidoc.Read(t.Context(), filepath.Join(root, "usr/bin/oxsupervise"), "oxsupervise")
	if err != nil {
		t.Fatal(err)
	}
	const (
		dir  = "drwxr-xr-x 0:0"
		file = "-rw-r--r-- 0:0 "
		exe  = "-rwxr-xr-x 0:0 "
	)
	want := map[string]string{
		"/usr/bin/oxsupervise":                                            exe,
		"/usr/libexec/oxsupervise":                                        dir,
		"/usr/libexec/oxsupervise/oxsupervise-launch":                     exe,
		"/usr/share/lintian/overrides/oxsupervise":                        file,
		"/usr/libexec/oxsupervise/oxsupervised":                           exe,
		"/lib/systemd/system/oxsupervise.service":                         file,
		"/etc/oxsupervise":                                                dir,
		"/etc/oxsupervise/policy.toml":                                    file,
		"/etc/oxsupervise/policy.d":                                       dir,
		"/etc/oxsupervise/policy.d/README":                                file,
		"/var/log/oxsupervise":                                            "drwx------ 0:0",
		"/usr/share/bash-completion/completions/oxsupervise":              file,
		"/usr/share/zsh/vendor-completions/_oxsupervise":                  file,
		"/usr/share/fish/vendor_completions.d/oxsupervise.fish":           file,
		"/usr/share/doc/oxsupervise/README.md":                            file,
		"/usr/share/doc/oxsupervise/daemon.md":                            file,
		"/usr/share/doc/oxsupervise/audit-schema.md":                      file,
		"/usr/share/doc/oxsupervise/copyright":                            file,
		"/usr/share/doc/oxsupervise/changelog.gz":                         file,
		"/usr/share/man/man1/oxsupervise.1.gz":                            file,
		"/etc/systemd/system/multi-user.target.wants/oxsupervise.service": "Lrwxrwxrwx 0:0 -> /lib/systemd/system/oxsupervise.service",
	}
	for _, v := range cli.Verbs {
		want["/usr/share/man/man1/"+cli.PageName(v)+".gz"] = file
	}
	for path, prefix := range want {
		got, ok := installed[path]
		switch {
		case !ok:
			t.Errorf("%s: not installed", path)
		case !strings.HasPrefix(got, prefix):
			t.Errorf("%s: %q, want %q...", path, got, prefix)
		}
	}
	for path, got := range installed {
		if _, ok := want[path]; !ok && !strings.HasPrefix(got, "d") && !strings.HasPrefix(path, "/var/lib/systemd/deb-systemd-helper-enabled/") {
			t.Errorf("%s: installed but not expected (%s)", path, got)
		}
	}
	for _, src := range []string{"policy/policy.toml", "systemd/oxsupervise.service"} {
		if _, err := os.Stat(src); err != nil {
			t.Fatal(err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(root, "etc/oxsupervise/policy.toml")); !bytes.Equal(data, mustRead(t, "policy/policy.toml")) {
		t.Errorf("/etc/oxsupervise/policy.toml is not dist/policy/policy.toml")
	}

	// The installed oxsupervise executes the installed daemon program
	// (a socket below a regular file: it stops at listening, before any
	// other effect), which has the daemon verb's command line.
	t.Run("daemon program", func(t *testing.T) {
		notDir := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(notDir, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(root, "usr/bin/oxsupervise"), "daemon", "--socket", filepath.Join(notDir, "api.sock"))
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "oxsupervise daemon: socket directory: mkdir "+notDir) {
			t.Errorf("oxsupervise daemon with a socket below a file: %v, want exit 1 from the daemon program's listen:\n%s", err, out)
		}
		help := run(t, nil, filepath.Join(root, "usr/bin/oxsupervise"), "daemon", "--help")
		if daemonHelp := run(t, nil, filepath.Join(root, "usr/libexec/oxsupervise/oxsupervised"), "--help"); daemonHelp != help {
			t.Errorf("oxsupervised --help differs from oxsupervise daemon --help:\n%s\n---\n%s", daemonHelp, help)
		}
	})

	t.Run("conffiles", func(t *testing.T) {
		status := string(mustRead(t, filepath.Join(root, "var/lib/dpkg/status")))
		for _, c := range []string{"/etc/oxsupervise/policy.toml", "/etc/oxsupervise/policy.d/README"} {
			if !strings.Contains(status, "\n "+c+" ") {
				t.Errorf("%s is not a conffile in dpkg's status:\n%s", c, status)
			}
		}
	})

	t.Run("unit", func(t *testing.T) {
		need(t, "systemd-analyze")
		unit := string(mustRead(t, filepath.Join(root, "lib/systemd/system/oxsupervise.service")))
		if !strings.Contains(unit, "\nExecStart=/usr/bin/oxsupervise daemon") || strings.Contains(unit, "/usr/local") {
			t.Errorf("the unit does not start /usr/bin/oxsupervise:\n%s", unit)
		}
		// verify checks that ExecStart is executable: point it at the
		// scratch root's binary, keep everything else.
		dir := t.TempDir()
		copyUnit := filepath.Join(dir, "oxsupervise.service")
		if err := os.WriteFile(copyUnit, []byte(strings.ReplaceAll(unit, "/usr/bin/oxsupervise", filepath.Join(root, "usr/bin/oxsupervise"))), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := run(t, nil, "systemd-analyze", "verify", copyUnit); strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify complains:\n%s", out)
		}
	})

	t.Run("man", func(t *testing.T) {
		need(t, "man")
		pages := append([]clidoc.Verb{{Name: "oxsupervise"}}, cli.Verbs...)
		for _, v := range pages {
			name := "oxsupervise.1.gz"
			if v.Path != nil {
				name = cli.PageName(v) + ".gz"
			}
			// No hyphenation or justification, so that flag names stay whole.
			cmd := exec.Command("man", "--warnings", "--nh", "--nj", "-l", filepath.Join(root, "usr/share/man/man1", name))
			cmd.Env = append(os.Environ(), "MANWIDTH=100", "MAN_KEEP_FORMATTING=0", "PAGER=cat")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil || stderr.Len() > 0 {
				t.Errorf("man -l %s: %v\n%s", name, err, stderr.String())
				continue
			}
			text := overstrike.ReplaceAllString(stdout.String(), "")
			if !strings.Contains(text, "NAME") {
				t.Errorf("%s renders without a NAME section:\n%s", name, text)
			}
			for _, f := range v.Flags {
				if !strings.Contains(text, "--"+f.Long) {
					t.Errorf("%s does not document --%s", name, f.Long)
				}
			}
			for _, s := range v.Subs {
				for _, f := range s.Flags {
					if !strings.Contains(text, "--"+f.Long) {
						t.Errorf("%s does not document %s --%s", name, strings.Join(s.Path, " "), f.Long)
					}
				}
			}
		}
	})

	t.Run("completions", func(t *testing.T) {
		bashFile := filepath.Join(root, "usr/share/bash-completion/completions/oxsupervise")
		out := run(t, nil, "bash", "-c", `source "$1"; complete -p oxsupervise
COMP_WORDS=(oxsupervise run --sa); COMP_CWORD=2; _oxsupervise; echo "flag: ${COMPREPLY[*]}"
COMP_WORDS=(oxsupervise run --net ""); COMP_CWORD=3; _oxsupervise; echo "value: ${COMPREPLY[*]}"
COMP_WORDS=(oxsupervise pol); COMP_CWORD=1; _oxsupervise; echo "verb: ${COMPREPLY[*]}"`, "bash", bashFile)
		for _, line := range []string{"complete -F _oxsupervise oxsupervise", "flag: --sandbox", "value: none allowlist full", "verb: policy"} {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("bash completion: no line %q in:\n%s", line, out)
			}
		}
		t.Run("zsh", func(t *testing.T) {
			need(t, "zsh")
			run(t, nil, "zsh", "-n", filepath.Join(root, "usr/share/zsh/vendor-completions/_oxsupervise"))
		})
		t.Run("fish", func(t *testing.T) {
			need(t, "fish")
			fishFile := filepath.Join(root, "usr/share/fish/vendor_completions.d/oxsupervise.fish")
			run(t, nil, "fish", "--no-execute", fishFile)
			out := run(t, nil, "fish", "--no-config", "-c", "source $argv[1]; complete -C 'oxsupervise run --sa'", fishFile)
			if !strings.Contains(out, "--sandbox") {
				t.Errorf("fish completes 'oxsupervise run --sa' without --sandbox:\n%s", out)
			}
		})
	})

	info := filepath.Join(root, "var/lib/dpkg/info")
	t.Run("idempotent", func(t *testing.T) {
		version := strings.TrimSpace(run(t, nil, "dpkg-deb", "--field", deb, "Version"))
		script(t, root, filepath.Join(info, "oxsupervise.postinst"), "configure", "")
		script(t, root, filepath.Join(info, "oxsupervise.postinst"), "configure", version)
		diffSnapshots(t, "postinst configure, twice", installed, snapshot(t, root))
		script(t, root, filepath.Join(info, "oxsupervise.prerm"), "upgrade", version)
		script(t, root, filepath.Join(info, "oxsupervise.prerm"), "upgrade", version)
		diffSnapshots(t, "prerm upgrade, twice", installed, snapshot(t, root))
		dpkg(t, root, "-i", deb)
		diffSnapshots(t, "reinstalling (an upgrade to the same version)", installed, snapshot(t, root))

		// The administrator's policy survives an upgrade (conffile).
		policyFile := filepath.Join(root, "etc/oxsupervise/policy.toml")
		mine := []byte("[network]\npolicy = \"allowlist\"\n")
		if err := os.WriteFile(policyFile, mine, 0o644); err != nil {
			t.Fatal(err)
		}
		dpkg(t, root, "-i", deb)
		if got := mustRead(t, policyFile); !bytes.Equal(got, mine) {
			t.Errorf("an upgrade replaced the administrator's policy.toml with:\n%s", got)
		}
	})

	t.Run("remove and purge", func(t *testing.T) {
		postrm := filepath.Join(t.TempDir(), "postrm")
		if err := os.WriteFile(postrm, mustRead(t, filepath.Join(info, "oxsupervise.postrm")), 0o755); err != nil {
			t.Fatal(err)
		}
		dpkg(t, root, "--remove", "oxsupervise")
		removed := snapshot(t, root)
		// The enablement symlink stays until purge, as with every Debian
		// service (deb-systemd-helper masks the unit meanwhile).
		for _, gone := range []string{"/usr/bin/oxsupervise", "/lib/systemd/system/oxsupervise.service"} {
			if _, ok := removed[gone]; ok {
				t.Errorf("%s is left after dpkg --remove", gone)
			}
		}
		for _, kept := range []string{"/etc/oxsupervise/policy.toml", "/var/log/oxsupervise"} {
			if _, ok := removed[kept]; !ok {
				t.Errorf("%s is gone after dpkg --remove (only purge removes it)", kept)
			}
		}
		script(t, root, postrm, "remove")
		diffSnapshots(t, "postrm remove, again", removed, snapshot(t, root))

		dpkg(t, root, "--purge", "oxsupervise")
		script(t, root, postrm, "purge")
		for path, desc := range snapshot(t, root) {
			if !strings.HasPrefix(desc, "d") {
				t.Errorf("%s is left after purge (%s)", path, desc)
			}
			if strings.Contains(path, "oxsupervise") {
				t.Errorf("%s is left after purge", path)
			}
		}
	})
}

// overstrike is grotty's bold and underline ("X\bX", "_\bX"), which man
// keeps when its output is not a terminal.
var overstrike = regexp.MustCompile(`.\x08`)

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

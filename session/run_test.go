//go:build linux

package session_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestRunWorkspaceWrite(t *testing.T) { runWorkspaceWrite(t, bin) }

// runWorkspaceWrite runs TestRunWorkspaceWrite with exe as oxsupervise and
// returns the session's audit log.
func runWorkspaceWrite(t *testing.T, exe string) string {
	requireRoot(t)
	abi := landlockABI(t)
	cg2 := cgroup2Mount(t)
	e := newEnv(t)
	e.bin = exe
	tmpFile := filepath.Join("/tmp", fmt.Sprintf("oxs-test-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(tmpFile) })
	etcFile := fmt.Sprintf("/etc/oxs-test-%d", time.Now().UnixNano())
	victim := filepath.Join(e.outside, "victim.txt")
	ops := []op{
		{"ws-write", "write new.txt", ok},
		{"ws-subdir-mkdir", "mkdir newdir", ok},
		{"tmp-write", "write " + tmpFile, ok},
		{"devnull-write", "write /dev/null", ok},
		{"etc-write", "write " + etcFile, outsideRoots},
		{"home-write", "write " + filepath.Join(e.home, "planted"), outsideRoots},
		{"parent-write", "write ../outside.txt", outsideRoots},
		{"outside-truncate", "truncate " + victim, outsideRoots},
		{"outside-append", "append " + victim, outsideRoots},
		{"outside-unlink", "unlink " + victim, outsideRoots},
		{"home-read-canary", "read " + filepath.Join(e.home, ".ssh", "canary"), denied},
		{"home-read-notes", "read " + filepath.Join(e.home, "notes.txt"), ok},
		{"hook-create", "write .git/hooks/pre-commit", readOnly},
		{"git-config-append", "append .git/config", readOnly},
		{"git-config-truncate", "truncate .git/config", readOnly},
		{"git-config-unlink", "unlink .git/config", []string{"EBUSY"}},
		{"git-config-link", "link .git/config cfglink", []string{"EXDEV"}},
		{"git-hooks-rename", "rename .git/hooks hooks2", []string{"EBUSY", "EXDEV"}},
		{"git-dir-rename", "rename .git gitx", []string{"EBUSY"}},
		// Landlock selftest families: link, rename, reparent, exchange,
		// truncate through an alias, symlink out of the workspace.
		{"link-in", "link " + victim + " linked.txt", noRefer},
		{"rename-in", "rename " + victim + " stolen.txt", noRefer},
		{"rename-out", "rename file.txt " + filepath.Join(e.outside, "moved.txt"), noRefer},
		{"reparent-out", "rename sub " + filepath.Join(e.outside, "sub"), noRefer},
		{"exchange", "exchange file.txt " + victim, noRefer},
		{"symlink-create", "symlink " + victim + " sl", ok},
		{"symlink-write", "append sl", outsideRoots},
		{"symlink-truncate", "truncate sl", outsideRoots},
		{"mknod-outside", "mknod " + filepath.Join(e.outside, "fifo"), outsideRoots},
		{"proc-sys-write", "append /proc/sys/kernel/hostname", []string{"EROFS", "EACCES"}},
		{"cgroup-escape", "append " + filepath.Join(cg2, "cgroup.procs"), []string{"EROFS", "EACCES"}},
	}
	mustWrite(t, filepath.Join(e.ws, ".env"), "DOTENV_SECRET\n")
	mustWrite(t, filepath.Join(e.ws, "sub", ".env.local"), "DOTENV_SECRET\n")
	mustWrite(t, filepath.Join(e.ws, ".env.example"), "example\n")
	got := e.runOps(t, "workspace-write", ops,
		`if git add file.txt new.txt && git commit -qm "from session"; then echo git=OK; else echo git=FAIL; fi`,
		`printf 'dotenv='; cat .env sub/.env.local | tr -d '\n'; echo`,
		`printf 'dotenv-example='; cat .env.example`,
		// $PPID is the supervisor, outside the session's Landlock domain.
		`if kill -0 $PPID 2>/dev/null; then echo signal-supervisor=OK; else echo signal-supervisor=DENIED; fi`)
	if want := map[bool]string{true: "DENIED", false: "OK"}[abi >= 6]; got["signal-supervisor"] != want {
		t.Errorf("signalling the supervisor from the session: %s, want %s (Landlock ABI %d)", got["signal-supervisor"], want, abi)
	}
	if got["git"] != "OK" {
		t.Errorf("git add/commit inside the session failed")
	}
	// Existing .env files are hidden (empty), .env.example is not.
	if got["dotenv"] != "" || got["dotenv-example"] != "example" {
		t.Errorf(".env content seen in the session: %q; .env.example: %q", got["dotenv"], got["dotenv-example"])
	}
	if mustRead(t, filepath.Join(e.ws, ".env")) != "DOTENV_SECRET\n" {
		t.Error(".env changed on the host")
	}

	// The files the denied operations aimed at do not exist, and nothing
	// outside changed.
	for _, p := range []string{etcFile, filepath.Join(e.home, "planted"), filepath.Join(e.base, "outside.txt"),
		filepath.Join(e.ws, ".git", "hooks", "pre-commit"), filepath.Join(e.ws, "cfglink"), filepath.Join(e.ws, "linked.txt"),
		filepath.Join(e.ws, "stolen.txt"), filepath.Join(e.outside, "moved.txt"), filepath.Join(e.outside, "sub"),
		filepath.Join(e.outside, "fifo"), filepath.Join(e.ws, "gitx"), filepath.Join(e.ws, "hooks2")} {
		if exists(p) {
			t.Errorf("%s exists after a denied operation", p)
		}
	}
	if got := mustRead(t, victim); got != "victim\n" {
		t.Errorf("victim.txt changed: %q", got)
	}
	if got := mustRead(t, filepath.Join(e.ws, "file.txt")); got != "tracked\n" {
		t.Errorf("file.txt changed: %q", got)
	}
	if !exists(filepath.Join(e.ws, "new.txt")) || !exists(tmpFile) || !exists(filepath.Join(e.ws, "newdir")) {
		t.Errorf("allowed writes did not land: new.txt %v, %s %v, newdir %v",
			exists(filepath.Join(e.ws, "new.txt")), tmpFile, exists(tmpFile), exists(filepath.Join(e.ws, "newdir")))
	}
	if strings.Contains(mustRead(t, filepath.Join(e.ws, ".git", "config")), "written by fsop") {
		t.Error(".git/config was modified")
	}
	if log := e.git(t, "log", "--oneline"); !strings.Contains(log, "from session") {
		t.Errorf("git commit inside the session did not land; git log:\n%s", log)
	}
	return filepath.Join(e.base, "audit.jsonl")
}

func TestRunDenyReadInsideWritableRoot(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	// A home inside a writable root (the workspace): Landlock cannot take
	// read access away below a granted root, so the mount layer masks it.
	home := filepath.Join(e.ws, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(home, ".ssh", "canary"), "canary-secret\n")
	r := e.run(t, []string{"HOME=" + home}, "run", "--", "sh", "-c", `cat "$HOME/.ssh/canary"; echo "cat=$?"; "$FSOP" write "$HOME/.ssh/canary"`)
	if strings.Contains(r.stdout, "canary-secret") {
		t.Fatalf("canary readable inside the session:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "cat=1") {
		t.Errorf("cat of the canary did not fail: %q (stderr %q)", r.stdout, r.stderr)
	}
	if got := mustRead(t, filepath.Join(home, ".ssh", "canary")); got != "canary-secret\n" {
		t.Errorf("canary changed: %q", got)
	}
}

func TestRunReadOnly(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	tmpFile := filepath.Join("/tmp", fmt.Sprintf("oxs-test-ro-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(tmpFile) })
	ops := []op{
		{"ws-write", "write new.txt", outsideRoots},
		{"ws-append", "append file.txt", outsideRoots},
		{"ws-truncate", "truncate file.txt", outsideRoots},
		{"ws-mkdir", "mkdir d", outsideRoots},
		{"ws-unlink", "unlink file.txt", outsideRoots},
		{"ws-rename", "rename file.txt renamed.txt", outsideRoots},
		{"ws-symlink", "symlink file.txt sl", outsideRoots},
		{"ws-chmod-file-read", "read file.txt", ok},
		{"tmp-write", "write " + tmpFile, outsideRoots},
		{"home-write", "write " + filepath.Join(e.home, "x"), outsideRoots},
		{"devnull-write", "write /dev/null", ok},
		{"canary-read", "read " + filepath.Join(e.home, ".ssh", "canary"), denied},
	}
	e.runOps(t, "read-only", ops)
	for _, p := range []string{"new.txt", "d", "renamed.txt", "sl"} {
		if exists(filepath.Join(e.ws, p)) {
			t.Errorf("%s exists after read-only session", p)
		}
	}
	if exists(tmpFile) {
		t.Errorf("%s exists after read-only session", tmpFile)
	}
	if got := mustRead(t, filepath.Join(e.ws, "file.txt")); got != "tracked\n" {
		t.Errorf("file.txt changed: %q", got)
	}
}

func TestRunWithoutFilesystemRules(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		mode   string
		canary []string // reading the credential canary
	}{
		{"full-access", ok},
		// external-sandbox: no filesystem rules, but existing credential
		// directories are hidden under an empty tmpfs.
		{"external-sandbox", []string{"ENOENT"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			e := newEnv(t)
			target := filepath.Join(e.outside, tc.mode+".txt")
			ops := []op{
				{"outside-write", "write " + target, ok},
				{"canary-read", "read " + filepath.Join(e.home, ".ssh", "canary"), tc.canary},
				{"proc-sys-write", "append /proc/sys/kernel/hostname", readOnly},
			}
			got := e.runOps(t, tc.mode, ops, `printf 'canary='; cat "$HOME/.ssh/canary" 2>/dev/null; echo`)
			if !exists(target) {
				t.Errorf("%s write did not land", tc.mode)
			}
			wantCanary := map[string]string{"full-access": "canary-secret", "external-sandbox": ""}[tc.mode]
			if got["canary"] != wantCanary {
				t.Errorf("canary content %q, want %q", got["canary"], wantCanary)
			}
		})
	}
}

func TestRunFailsClosed(t *testing.T) {
	requireRoot(t)
	e := newEnv(t)
	for _, layer := range []string{"landlock", "cgroup", "mount-namespace"} {
		t.Run(layer, func(t *testing.T) {
			marker := filepath.Join(e.ws, "marker-"+layer)
			r := e.run(t, []string{"OXSUPERVISE_FORCE_UNAVAILABLE=" + layer}, "run", "--", "touch", marker)
			if r.code != 125 {
				t.Errorf("exit %d, want 125; stderr:\n%s", r.code, r.stderr)
			}
			if exists(marker) {
				t.Errorf("the command ran although layer %s was unavailable", layer)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if !strings.Contains(l, "warning:") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "layer "+layer) {
				t.Errorf("want one error line naming layer %s, got:\n%s", layer, r.stderr)
			}
		})
	}
	t.Run("full-access-needs-no-landlock", func(t *testing.T) {
		marker := filepath.Join(e.ws, "marker-fa")
		r := e.run(t, []string{"OXSUPERVISE_FORCE_UNAVAILABLE=landlock"}, "run", "--sandbox", "full-access", "--", "touch", marker)
		if r.code != 0 || !exists(marker) {
			t.Errorf("full-access without landlock: exit %d, marker %v; stderr:\n%s", r.code, exists(marker), r.stderr)
		}
	})
}

func TestRunExitStatus(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		r := e.run(t, nil, "run", "--", "sh", "-c", tc.script)
		if r.code != tc.want {
			t.Errorf("%q: exit %d, want %d (stderr %q)", tc.script, r.code, tc.want, r.stderr)
		}
	}
	r := e.run(t, nil, "run", "--", "no-such-command-oxs")
	if r.code != 127 {
		t.Errorf("missing command: exit %d, want 127", r.code)
	}
}

func TestRunEnvironmentAndCredentials(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	if err := os.Chown(e.ws, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := e.run(t, []string{"GITHUB_TOKEN=leak", "AWS_SECRET_ACCESS_KEY=leak", "KEEP_ME=yes"},
		"run", "--user", "65534", "--", "sh", "-c",
		`id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; env; ls /proc/self/fd; "$FSOP" write owned.txt`)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if lines[0] != "65534" || lines[1] != "65534" {
		t.Errorf("uid/gid = %q/%q, want 65534", lines[0], lines[1])
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "KEEP_ME=yes"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in:\n%s", want, r.stdout)
		}
	}
	for _, leak := range []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
		if strings.Contains(r.stdout, leak) {
			t.Errorf("%s reached the command", leak)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(r.stdout), "OK") {
		t.Errorf("write in workspace as uid 65534 failed:\n%s", r.stdout)
	}

	// Through sudo, the caller is SUDO_UID.
	r = e.run(t, []string{"SUDO_UID=65534", "SUDO_GID=65534"}, "run", "--", "sh", "-c", `id -u; echo "$HOME"`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "65534\n") {
		t.Errorf("with SUDO_UID=65534: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, e.home) {
		t.Errorf("the command kept the supervisor's HOME: %q", r.stdout)
	}
}

func TestRunInheritedFDsClosed(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	f, err := os.Open(e.outside)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--audit-log", filepath.Join(t.TempDir(), "audit.jsonl"), "--", "ls", "/proc/self/fd")
	cmd.Dir = e.ws
	cmd.ExtraFiles = []*os.File{f, f, f} // fds 3, 4, 5 in oxsupervise
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	fds := strings.Fields(string(out))
	sort.Strings(fds)
	// ls itself opens one descriptor for /proc/self/fd.
	if len(fds) > 4 {
		t.Errorf("command sees descriptors %v, want only 0-2 (+ ls's own)", fds)
	}
}

// OXSUPERVISE_DEBUG_TIMING makes run print one line per phase of the
// session's start and end, in the order they happen (no duration is
// asserted: speed lives in make bench).
func TestRunDebugTiming(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	r := e.run(t, []string{"OXSUPERVISE_DEBUG_TIMING=1"}, "run", "--", "true")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	var phases []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "oxsupervise: timing: "); ok {
			phases = append(phases, strings.TrimSpace(rest[:strings.Index(rest, "  ")]))
		}
	}
	want := []string{"policy resolved", "policy bound", "launcher started", "command executed", "command exited", "audit closed", "host closed"}
	i := 0
	for _, p := range phases {
		if i < len(want) && p == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("timing phases %q, want %q among them in this order\n%s", phases, want, r.stderr)
	}
}

//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/internal/modelapi"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// The real agent CLIs, installed from the npm registry once per test run
// into a temporary prefix every user can read. No registry, no test: the
// failure says so (a CI machine without network access cannot prove that
// agents run confined).
var npmAgents = struct {
	once sync.Once
	dir  string
	err  error
}{}

var agentPackages = []string{"@anthropic-ai/claude-code", "@openai/codex", "opencode-ai"}

// TestMain removes the agents' npm install (about 1 GiB) when the tests
// are done: every run installs them afresh, and left behind they fill the
// disk of a machine that runs the suite often.
func TestMain(m *testing.M) {
	code := m.Run()
	if npmAgents.dir != "" {
		os.RemoveAll(npmAgents.dir)
	}
	os.Exit(code)
}

func agentBin(t *testing.T, name string) string {
	t.Helper()
	npmAgents.once.Do(func() {
		npm, err := exec.LookPath("npm")
		if err != nil {
			npmAgents.err = fmt.Errorf("npm not found (%v): install Node.js and npm (make deps)", err)
			return
		}
		dir, err := os.MkdirTemp("/var/tmp", "oxs-agents-")
		if err != nil {
			npmAgents.err = err
			return
		}
		os.Chmod(dir, 0o755)
		args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"}, agentPackages...)
		out, err := exec.Command(npm, args...).CombinedOutput()
		if err != nil {
			npmAgents.err = fmt.Errorf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		npmAgents.dir = dir
	})
	if npmAgents.err != nil {
		t.Fatalf("the real agent CLIs could not be installed from the npm registry, so this test cannot prove they run confined: %v", npmAgents.err)
	}
	bin := filepath.Join(npmAgents.dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("npm installed %v but %s is missing: %v", agentPackages, bin, err)
	}
	return filepath.Join(npmAgents.dir, "node_modules", ".bin")
}

// agentUser is an unprivileged account with a home directory, a secret in
// ~/.ssh and a git repository to work in (the agents' state goes to its
// home, which is not a writable root).
type agentUser struct {
	name      string
	uid, gid  int
	home, ws  string
	canary    string
	canaryVal string
}

func newAgentUser(t *testing.T, base string) *agentUser {
	t.Helper()
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Fatalf("useradd not found: %v", err)
	}
	u := &agentUser{name: fmt.Sprintf("oxsag%d", os.Getpid()%100000), home: filepath.Join(base, "home")}
	if out, err := exec.Command("useradd", "-M", "-d", u.home, "-s", "/bin/bash", "-U", u.name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", u.name).Run() })
	id := func(flag string) int {
		out, err := exec.Command("id", flag, u.name).Output()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return n
	}
	u.uid, u.gid = id("-u"), id("-g")
	u.ws = filepath.Join(u.home, "project")
	u.canary = filepath.Join(u.home, ".ssh", "sandbox-canary")
	u.canaryVal = "canary-" + strconv.Itoa(os.Getpid())
	for _, d := range []string{u.home, filepath.Join(u.home, ".ssh"), u.ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(u.canary, []byte(u.canaryVal+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(u.ws, "README.md"), []byte("old text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(u.home, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
	u.as(t, u.ws, "git", "init", "-q")
	u.as(t, u.ws, "git", "config", "user.email", "agent@example.test")
	u.as(t, u.ws, "git", "config", "user.name", "Agent Test")
	u.as(t, u.ws, "git", "add", "-A")
	u.as(t, u.ws, "git", "commit", "-qm", "initial")
	return u
}

// as runs a command as the user, outside any session (set-up only).
func (u *agentUser) as(t *testing.T, dir string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + u.home, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v as %s: %v\n%s", argv, u.name, err, out)
	}
	return string(out)
}

// seedScript is what the stand-in model asks every agent to run: the
// three seed checks, a write to the agent's own settings, and ordinary
// work in the repository. Each command prints its exit status last.
func seedScript(u *agentUser, otherPort int, settings string) []modelapi.Step {
	st := func(name, cmd string) modelapi.Step {
		return modelapi.Step{Name: name, Command: cmd + `; echo "exit=$?"`}
	}
	return []modelapi.Step{
		st("canary", "cat "+u.canary),
		st("listener", fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED'", otherPort)),
		st("outside", "touch ../outside-the-project.txt"),
		st("settings", `echo '{"hooks":{"PreToolUse":[]}}' > `+settings),
		st("edit", "sed -i s/old/new/ README.md && cat README.md"),
		st("commit", "git commit -qam 'agent edit' && git log --oneline -1"),
	}
}

// otherListener is a loopback service that is not the model API.
func otherListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return testutil.Serve(t, ln, nil).Addr().(*net.TCPAddr).Port
}

// runAsSudo runs `oxsupervise run --audit-log LOG -- argv...` the way sudo
// runs it: as root, with SUDO_UID/SUDO_GID naming the user, in the
// user's workspace, and no oxsupervise configuration anywhere.
func runAsSudo(t *testing.T, bin string, u *agentUser, auditLog string, env []string, argv ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-test.run=^TestCLIHelperProcess$", "--", "run", "--audit-log", auditLog, "--"}, argv...)...)
	cmd.Dir = u.ws
	// pinDirEnv: a standalone run as root keeps no BPF programs pinned on
	// the machine.
	cmd.Env = append([]string{cliAsEnv + "=1", "HOME=/root", "USER=root", "SUDO_USER=" + u.name,
		"SUDO_UID=" + strconv.Itoa(u.uid), "SUDO_GID=" + strconv.Itoa(u.gid), pinDirEnv + "=off"}, env...)
	return runCLI(t, cmd)
}

// runThroughDaemon runs `oxsupervise run -- argv...` as the user, who is
// not root, so it goes through the daemon the world serves (the fleet
// set-up: the daemon builds the boundary and writes the audit log).
func runThroughDaemon(t *testing.T, w *cliWorld, u *agentUser, env []string, argv ...string) cliResult {
	t.Helper()
	cmd := exec.Command(w.bin, append([]string{"-test.run=^TestCLIHelperProcess$", "--", "run", "--"}, argv...)...)
	cmd.Dir = u.ws
	cmd.Env = append([]string{cliAsEnv + "=1", socketEnv + "=" + w.socket, "HOME=" + u.home, "USER=" + u.name}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	return runCLI(t, cmd)
}

// checkSeedResults asserts the recorded tool results, the audit log and
// the files' states after an agent ran seedScript.
//
// audited says which of the two file refusals are Landlock's (EACCES)
// rather than the session's read-only mount view's (EROFS, audited by the
// read-only view's tracer, bpf/roview.c). The view keeps
// writable only the writable roots and the directories of writable state
// files: with Claude Code's ~/.claude.json the home directory stays
// mount-writable and Landlock refuses ../outside-the-project.txt there;
// for Codex and OpenCode the view refuses it. Codex's config.toml lies
// inside its writable ~/.codex, protected by a read-only bind mount.
type audited struct{ outside, settings bool }

func checkSeedResults(t *testing.T, api *modelapi.Server, u *agentUser, auditLog, settings, settingsBefore string, otherPort int, want audited) {
	t.Helper()
	res := api.Results()
	for _, s := range seedScript(u, otherPort, settings) {
		if _, ok := res[s.Name]; !ok {
			t.Errorf("the stand-in got no result for step %s (%q); requests: %v", s.Name, s.Command, api.Requests())
		}
	}
	if !api.Done() {
		t.Errorf("the agent did not reach the end of the script; requests: %v", api.Requests())
	}
	failed := func(step, why string) {
		t.Helper()
		out := res[step].Output
		if strings.Contains(out, "exit=0") || !strings.Contains(out, "exit=") {
			t.Errorf("step %s succeeded or did not run (%s): %q", step, why, out)
		}
	}
	failed("canary", "~/.ssh is unreadable")
	if strings.Contains(res["canary"].Output, u.canaryVal) {
		t.Errorf("the canary's content reached the model: %q", res["canary"].Output)
	}
	failed("listener", "loopback outside the session")
	if strings.Contains(res["listener"].Output, "CONNECTED") {
		t.Errorf("the agent reached the other listener: %q", res["listener"].Output)
	}
	failed("outside", "the workspace's parent is read-only")
	failed("settings", "the agent's settings are read-only")
	for _, step := range []string{"edit", "commit"} {
		if !strings.Contains(res[step].Output, "exit=0") {
			t.Errorf("step %s failed inside the session: %q", step, res[step].Output)
		}
	}
	if !strings.Contains(res["edit"].Output, "new text") {
		t.Errorf("edit output %q", res["edit"].Output)
	}
	if !strings.Contains(res["commit"].Output, "agent edit") {
		t.Errorf("commit output %q", res["commit"].Output)
	}

	// Files.
	if _, err := os.Lstat(filepath.Join(u.home, "outside-the-project.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("../outside-the-project.txt exists after the session (%v)", err)
	}
	if b, err := os.ReadFile(settings); err != nil || string(b) != settingsBefore {
		t.Errorf("the agent's settings %s changed: %q (%v), was %q", settings, b, err, settingsBefore)
	}
	if b, _ := os.ReadFile(filepath.Join(u.ws, "README.md")); string(b) != "new text\n" {
		t.Errorf("README.md after the session: %q", b)
	}
	if log := u.as(t, u.ws, "git", "log", "--format=%s"); !strings.HasPrefix(log, "agent edit\n") {
		t.Errorf("git log after the session: %q", log)
	}

	// Audit: one refusal record for each seed check and the settings write.
	b, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	log := string(b)
	missing := false
	records := [][]string{
		{`"kind":"denial"`, `"path":"` + u.canary + `"`},
		{`"kind":"denial"`, `"action":"connect"`, `"port":` + strconv.Itoa(otherPort)},
	}
	refusedBy := func(step string, byLandlock bool) {
		t.Helper()
		errText := "Read-only file system"
		if byLandlock {
			errText = "Permission denied"
		}
		// bash says "Permission denied", zsh "permission denied".
		if !strings.Contains(strings.ToLower(res[step].Output), strings.ToLower(errText)) {
			t.Errorf("step %s: want %q (refused by %s), got %q", step, errText, map[bool]string{true: "Landlock", false: "the read-only view"}[byLandlock], res[step].Output)
		}
	}
	refusedBy("outside", want.outside)
	refusedBy("settings", want.settings)
	outside := filepath.Join(u.home, "outside-the-project.txt")
	if want.outside {
		// Landlock names the directory a file could not be created in.
		records = append(records, []string{`"kind":"denial"`, `"command_line":"touch ../outside-the-project.txt"`, `"path":"` + u.home + `"`})
	} else {
		// The read-only view's tracer names the file (errno 30, EROFS).
		records = append(records, []string{`"kind":"denial"`, `"command_line":"touch ../outside-the-project.txt"`, `"layer":"read-only-view"`, `"errno":30`, `"path":"` + outside + `"`})
	}
	if want.settings {
		records = append(records, []string{`"kind":"denial"`, `"path":"` + settings + `"`})
	} else {
		records = append(records, []string{`"kind":"denial"`, `"layer":"read-only-view"`, `"errno":30`, `"path":"` + settings + `"`})
	}
	for _, want := range records {
		if !testutil.LineHasAll(log, want...) {
			t.Errorf("no audit record with %q in %s", want, auditLog)
			missing = true
		}
	}
	if missing {
		t.Logf("audit log:\n%s", log)
	}
}

// agentRoute runs an agent command the one way or the other and returns
// the result and the audit log it was recorded in.
type agentRoute func(t *testing.T, w *cliWorld, u *agentUser, env []string, argv ...string) (cliResult, string)

var agentRoutes = []struct {
	name string
	run  agentRoute
}{
	{"sudo", func(t *testing.T, w *cliWorld, u *agentUser, env []string, argv ...string) (cliResult, string) {
		log := filepath.Join(w.base, "log", "standalone.jsonl")
		return runAsSudo(t, w.bin, u, log, env, argv...), log
	}},
	{"daemon", func(t *testing.T, w *cliWorld, u *agentUser, env []string, argv ...string) (cliResult, string) {
		w.serve(t)
		return runThroughDaemon(t, w, u, env, argv...), w.opts.AuditPath
	}},
}

// Claude Code, installed from npm, run by `sudo oxsupervise run -- claude`
// and by an unprivileged user through the daemon, with nothing configured
// but ANTHROPIC_BASE_URL (the stand-in on 127.0.0.1) and an API key: its
// profile lets it reach exactly the stand-in, keep its state, and nothing
// else.
func TestAgentClaudeCode(t *testing.T) {
	testutil.RequireRoot(t)
	binDir := agentBin(t, "claude")
	for _, route := range agentRoutes {
		t.Run(route.name, func(t *testing.T) {
			w := newCLIWorld(t)
			u := newAgentUser(t, w.base)
			settings := filepath.Join(u.home, ".claude", "settings.json")
			settingsBefore := "{}\n"
			u.writeFile(t, settings, settingsBefore)

			other := otherListener(t)
			// Besides the seed checks: an MCP server added to
			// ~/.claude.json, which is writable state but would start a
			// program outside the boundary the next time claude runs.
			addMCP := modelapi.Step{Name: "mcp", Command: `python3 -c 'import json,os; p=os.path.expanduser("~/.claude.json"); d=json.load(open(p)); d["mcpServers"]={"evil":{"command":"/bin/sh","args":["-c","id"]}}; json.dump(d,open(p,"w"))'; echo "exit=$?"`}
			api, err := modelapi.Anthropic(append(seedScript(u, other, settings), addMCP), "Bash")
			if err != nil {
				t.Fatal(err)
			}
			defer api.Close()
			res, auditLog := route.run(t, w, u,
				[]string{"PATH=" + binDir + ":/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-standin"},
				"claude", "-p", "Run the scripted steps.", "--dangerously-skip-permissions")
			t.Logf("claude: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
			if res.code != 0 {
				t.Errorf("claude exited %d", res.code)
			}
			if !strings.Contains(res.stdout, modelapi.FinalText) {
				t.Errorf("claude did not print the model's final message")
			}
			// No hook installed: the session says once that the agent's
			// commands share its tier, on stderr and in session_start.
			const shared = "no oxsupervise hook in claude-code's settings"
			if strings.Count(res.stderr, shared) != 1 {
				t.Errorf("stderr has the shared-tier warning %d times, want once:\n%s", strings.Count(res.stderr, shared), res.stderr)
			}
			if log, _ := os.ReadFile(auditLog); !testutil.LineHasAll(string(log), `"kind":"session_start"`, shared) {
				t.Errorf("no session_start record with the shared-tier warning in %s", auditLog)
			}
			checkSeedResults(t, api, u, auditLog, settings, settingsBefore, other, audited{outside: true, settings: true})
			// Its state was written: the transcript of this session below
			// ~/.claude/projects, and ~/.claude.json.
			transcripts, _ := filepath.Glob(filepath.Join(u.home, ".claude", "projects", "*", "*.jsonl"))
			if len(transcripts) == 0 {
				t.Errorf("no transcript below ~/.claude/projects")
			}
			b, err := os.ReadFile(filepath.Join(u.home, ".claude.json"))
			if err != nil || !strings.Contains(string(b), `"firstStartTime"`) {
				t.Errorf("~/.claude.json was not written by the agent: %q %v", b, err)
			}
			if out := api.Results()["mcp"].Output; !strings.Contains(out, "exit=0") {
				t.Errorf("writing ~/.claude.json from a tool failed: %q", out)
			}
			if strings.Contains(string(b), "evil") {
				t.Errorf("the MCP server the session added survived it: %s", b)
			}
			if log, _ := os.ReadFile(auditLog); !testutil.LineHasAll(string(log), `"action":"rollback"`, `"rule":"agent profile claude-code: mcpServers starts programs`) {
				t.Errorf("no audit record of the rollback of mcpServers in %s", auditLog)
			}
		})
	}
}

// codexArgs points Codex at the stand-in the only way 0.171 takes (a
// custom provider on the command line; it does not read OPENAI_BASE_URL).
func codexArgs(api *modelapi.Server) []string {
	return []string{"codex",
		"-c", `model_providers.standin.name="standin"`,
		"-c", `model_providers.standin.base_url="` + api.URL + `/v1"`,
		"-c", `model_providers.standin.wire_api="responses"`,
		"-c", `model_providers.standin.env_key="OPENAI_API_KEY"`,
		"-c", `model_provider="standin"`, "-c", `model="gpt-5-codex"`,
		"exec", "--skip-git-repo-check", "Run the scripted steps."}
}

// Codex, installed from npm, run by `sudo oxsupervise run -- codex exec`
// and through the daemon, with nothing configured but its provider's base_url: its own sandbox is
// switched off (the session is the sandbox), it reaches exactly the
// stand-in, and keeps its state in ~/.codex with its rules read-only.
func TestAgentCodex(t *testing.T) {
	testutil.RequireRoot(t)
	binDir := agentBin(t, "codex")
	for _, route := range agentRoutes {
		t.Run(route.name, func(t *testing.T) {
			w := newCLIWorld(t)
			u := newAgentUser(t, w.base)
			settings := filepath.Join(u.home, ".codex", "config.toml")
			settingsBefore := "# user config\n"
			u.writeFile(t, settings, settingsBefore)

			other := otherListener(t)
			api, err := modelapi.OpenAI(seedScript(u, other, settings))
			if err != nil {
				t.Fatal(err)
			}
			defer api.Close()
			res, auditLog := route.run(t, w, u, []string{"PATH=" + binDir + ":/usr/bin:/bin", "OPENAI_API_KEY=sk-standin"}, codexArgs(api)...)
			t.Logf("codex: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
			if res.code != 0 {
				t.Errorf("codex exited %d", res.code)
			}
			if !strings.Contains(res.stderr, "sandbox: danger-full-access") {
				t.Errorf("codex did not run with its own sandbox off (the profile's -c sandbox_mode)")
			}
			checkSeedResults(t, api, u, auditLog, settings, settingsBefore, other, audited{})
			sessions, _ := filepath.Glob(filepath.Join(u.home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"))
			if len(sessions) == 0 {
				t.Errorf("no session rollout below ~/.codex/sessions")
			}
		})
	}
}

// OpenCode, installed from npm (opencode-ai), run by `sudo oxsupervise run
// -- opencode run` and through the daemon, with nothing configured but
// ANTHROPIC_BASE_URL: the same checks as for the other agents.
func TestAgentOpenCode(t *testing.T) {
	testutil.RequireRoot(t)
	binDir := agentBin(t, "opencode")
	for _, route := range agentRoutes {
		t.Run(route.name, func(t *testing.T) {
			w := newCLIWorld(t)
			u := newAgentUser(t, w.base)
			settings := filepath.Join(u.home, ".config", "opencode", "opencode.jsonc")
			os.MkdirAll(filepath.Dir(settings), 0o700)
			settingsBefore := "{}\n"
			os.WriteFile(settings, []byte(settingsBefore), 0o600)
			filepath.Walk(filepath.Join(u.home, ".config"), func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })

			other := otherListener(t)
			api, err := modelapi.Anthropic(seedScript(u, other, settings), "bash")
			if err != nil {
				t.Fatal(err)
			}
			defer api.Close()
			res, auditLog := route.run(t, w, u,
				[]string{"PATH=" + binDir + ":/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + api.URL + "/v1", "ANTHROPIC_API_KEY=sk-ant-standin"},
				// The agent's own permission prompts are off (as Claude
				// Code's are above), so the kernel is what refuses.
				"opencode", "run", "--dangerously-skip-permissions", "--model", "anthropic/claude-sonnet-4-5", "Run the scripted steps.")
			t.Logf("opencode: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
			if res.code != 0 {
				t.Errorf("opencode exited %d", res.code)
			}
			checkSeedResults(t, api, u, auditLog, settings, settingsBefore, other, audited{settings: true})
			if _, err := os.Stat(filepath.Join(u.home, ".local", "share", "opencode", "opencode.db")); err != nil {
				t.Errorf("OpenCode's database was not written: %v", err)
			}
		})
	}
}

// writeFile makes path (and its directory) the user's, with content, as
// the agent's own earlier runs would have left it.
func (u *agentUser) writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(path), path} {
		if err := os.Lchown(p, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/internal/modelapi"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// hookPolicy is the managed policy the hook tests judge with: one command
// allowed, one denied, everything else the default (ask).
const hookPolicy = `[[permissions.rules]]
tool = "bash"
pattern = "echo hook-*"
action = "allow"

[[permissions.rules]]
tool = "bash"
pattern = "rm *"
action = "deny"
`

// hookWorld is a user with `oxsupervise agent setup AGENT` done, the
// managed policy above, and the oxsupervise the hook runs: a wrapper that
// re-executes this test binary as the CLI.
type hookWorld struct {
	w       *cliWorld
	u       *agentUser
	managed string
}

func newHookWorld(t *testing.T, agent string, extra ...string) *hookWorld {
	t.Helper()
	w := newCLIWorld(t)
	u := newAgentUser(t, w.base)
	h := &hookWorld{w: w, u: u, managed: filepath.Join(w.base, "managed")}
	writeFile(t, filepath.Join(h.managed, "policy.toml"), hookPolicy)
	wrapper := filepath.Join(w.base, "hookbin", "oxsupervise")
	writeFile(t, wrapper, "#!/bin/sh\n"+cliAsEnv+"=1 exec '"+w.bin+"' -test.run='^TestCLIHelperProcess$' -- \"$@\"\n")
	os.Chmod(wrapper, 0o755)
	os.Chmod(filepath.Dir(wrapper), 0o755)
	out := u.as(t, u.ws, append([]string{wrapper, "agent", "setup", agent, "--exe", wrapper}, extra...)...)
	if !strings.Contains(out, "the PreToolUse hook") {
		t.Fatalf("agent setup %s: %s", agent, out)
	}
	return h
}

// run runs an agent as the user, outside any session (the hook judges;
// nesting needs a session), and returns its output.
func (h *hookWorld) run(t *testing.T, env []string, argv ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = h.u.ws
	cmd.Env = append([]string{"HOME=" + h.u.home, "USER=" + h.u.name, "OXSUPERVISE_MANAGED_DIR=" + h.managed}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.u.uid), Gid: uint32(h.u.gid)}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return code, out.String()
}

// hookSteps: an allowed command, a denied one (the file stays), and the
// results each must come back with.
func hookSteps() []modelapi.Step {
	return []modelapi.Step{
		{Name: "allowed", Command: "echo hook-$((40+2))"},
		{Name: "denied", Command: "rm README.md"},
	}
}

func checkHookResults(t *testing.T, api *modelapi.Server, h *hookWorld) {
	t.Helper()
	res := api.Results()
	for name, r := range res {
		t.Logf("tool result %s: error=%t %q", name, r.IsError, r.Output)
	}
	if r := res["allowed"]; !strings.Contains(r.Output, "hook-42") {
		t.Errorf("the allowed command did not run: result %+v", r)
	}
	r := res["denied"]
	for _, want := range []string{`pattern = "rm *"`, filepath.Join(h.managed, "policy.toml")} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("the denied command's result %q lacks %q (the rule the model must see)", r.Output, want)
		}
	}
	if _, err := os.Stat(filepath.Join(h.u.ws, "README.md")); err != nil {
		t.Errorf("the denied rm ran: %v", err)
	}
}

// Claude Code with the hook `oxsupervise agent setup claude-code` wrote:
// a command the permission rules allow runs, one they deny comes back to
// the model as a denial naming the rule and its file.
func TestHookClaudeCode(t *testing.T) {
	testutil.RequireRoot(t)
	binDir := agentBin(t, "claude")
	h := newHookWorld(t, "claude-code")
	b, _ := os.ReadFile(filepath.Join(h.u.home, ".claude", "settings.json"))
	if !strings.Contains(string(b), "hook claude-code") {
		t.Fatalf("settings.json after agent setup:\n%s", b)
	}
	api, err := modelapi.Anthropic(hookSteps(), "Bash")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	code, out := h.run(t, []string{"PATH=" + binDir + ":/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-standin",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}, filepath.Join(binDir, "claude"), "-p", "Run the scripted steps.")
	t.Logf("claude: exit %d\n%s", code, out)
	checkHookResults(t, api, h)
}

// Codex with the hook in ~/.codex/hooks.json. Codex runs a user's hook
// only once it is trusted; the test passes --dangerously-bypass-hook-trust
// (what `agent setup` tells the user, with /hooks and --managed). Its
// hooks cannot ask: the default verdict would come back as a denial.
func TestHookCodex(t *testing.T) {
	testutil.RequireRoot(t)
	binDir := agentBin(t, "codex")
	h := newHookWorld(t, "codex")
	if b, _ := os.ReadFile(filepath.Join(h.u.home, ".codex", "hooks.json")); !strings.Contains(string(b), "hook codex") {
		t.Fatalf("hooks.json after agent setup:\n%s", b)
	}
	steps := append(hookSteps(), modelapi.Step{Name: "unruled", Command: "touch unruled-" + strconv.Itoa(os.Getpid())})
	api, err := modelapi.OpenAI(steps)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	argv := codexArgs(api)
	argv = append([]string{filepath.Join(binDir, "codex"), "--dangerously-bypass-hook-trust"}, argv[1:]...)
	code, out := h.run(t, []string{"PATH=" + binDir + ":/usr/bin:/bin", "OPENAI_API_KEY=sk-standin"}, argv...)
	t.Logf("codex: exit %d\n%s", code, out)
	checkHookResults(t, api, h)
	if r := api.Results()["unruled"]; !strings.Contains(r.Output, "cannot ask") {
		t.Errorf("a command no rule allows came back as %q, want the denial saying Codex hooks cannot ask", r.Output)
	}
	if _, err := os.Stat(filepath.Join(h.u.ws, "unruled-"+strconv.Itoa(os.Getpid()))); err == nil {
		t.Error("the command no rule allows ran")
	}
}

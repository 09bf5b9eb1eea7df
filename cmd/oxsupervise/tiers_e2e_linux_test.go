package main

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/internal/modelapi"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// tiersPolicy lets every command run but rm, which the hook must refuse
// with its rule.
const tiersPolicy = `[[permissions.rules]]
tool = "bash"
pattern = "rm *"
action = "deny"

[[permissions.rules]]
tool = "bash"
pattern = "*"
action = "allow"
`

// tierSteps are the commands the stand-in model has the agent run: the
// agent's API key (keyVar) must be gone from a command's environment, the
// API closed to it, the workspace writable, and rm refused by the rules.
func tierSteps(keyVar string) []modelapi.Step {
	return []modelapi.Step{
		{Name: "key", Command: `echo "key=[$` + keyVar + `]"`},
		{Name: "api", Command: `curl -sS -m 5 -o /dev/null -w 'code=%{http_code}' "$(cat api-url.txt)"; echo " exit=$?"`},
		{Name: "write", Command: `echo tiered > tiered.txt && echo wrote`},
		{Name: "denied", Command: "rm README.md"},
	}
}

// TestTwoTiersClaudeCode and TestTwoTiersCodex are the two tiers with the
// real agents from npm: `sudo oxsupervise run -- AGENT` with the hook
// `oxsupervise agent setup` installed. The agent reaches its API (the
// stand-in); every shell command it runs goes into a nested session with
// the command tier: no API key in its environment, the API host closed to
// it, the workspace still writable; a command the rules deny comes back to
// the model with the rule.
func TestTwoTiersClaudeCode(t *testing.T) {
	testutil.RequireRoot(t)
	binDir := agentBin(t, "claude")
	h := newHookWorld(t, "claude-code")
	api, err := modelapi.Anthropic(tierSteps("ANTHROPIC_API_KEY"), "Bash")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	checkTiers(t, h, api, []string{"PATH=" + binDir + ":/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-standin"},
		api.URL+"/v1/messages", "claude", "-p", "Run the scripted steps.")
}

func TestTwoTiersCodex(t *testing.T) {
	testutil.RequireRoot(t)
	binDir := agentBin(t, "codex")
	h := newHookWorld(t, "codex")
	api, err := modelapi.OpenAI(tierSteps("OPENAI_API_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	argv := codexArgs(api)
	argv = append([]string{"codex", "--dangerously-bypass-hook-trust"}, argv[1:]...)
	checkTiers(t, h, api, []string{"PATH=" + binDir + ":/usr/bin:/bin", "OPENAI_API_KEY=sk-standin"}, api.URL+"/v1/responses", argv...)
}

func checkTiers(t *testing.T, h *hookWorld, api *modelapi.Server, env []string, apiURL string, argv ...string) {
	t.Helper()
	writeFile(t, filepath.Join(h.managed, "policy.toml"), tiersPolicy)
	h.u.writeFile(t, filepath.Join(h.u.ws, "api-url.txt"), apiURL+"\n")
	os.Chmod(filepath.Join(h.u.ws, "api-url.txt"), 0o644)
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	_, apiPort, _ := net.SplitHostPort(u.Host)

	log := filepath.Join(h.w.base, "log", "tiers.jsonl")
	res := runAsSudo(t, h.w.bin, h.u, log, append(env, "OXSUPERVISE_MANAGED_DIR="+h.managed), argv...)
	t.Logf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", argv[0], res.code, res.stdout, res.stderr)
	results := api.Results()
	for name, r := range results {
		t.Logf("tool result %s: error=%t %q", name, r.IsError, r.Output)
	}
	if !strings.Contains(res.stdout, modelapi.FinalText) {
		t.Errorf("%s did not print the model's final message (it did not reach its API)", argv[0])
	}
	if strings.Contains(res.stderr, "no oxsupervise hook") {
		t.Errorf("the shared-tier warning with the hook installed:\n%s", res.stderr)
	}
	if r := results["key"]; !strings.Contains(r.Output, "key=[]") {
		t.Errorf("the command saw the agent's API key: %q", r.Output)
	}
	if r := results["api"]; !strings.Contains(r.Output, "code=000") || strings.Contains(r.Output, "exit=0") {
		t.Errorf("the command reached the model API: %q", r.Output)
	}
	if b, err := os.ReadFile(filepath.Join(h.u.ws, "tiered.txt")); err != nil || string(b) != "tiered\n" {
		t.Errorf("the command's workspace write did not land: %q %v", b, err)
	}
	r := results["denied"]
	for _, want := range []string{`pattern = "rm *"`, filepath.Join(h.managed, "policy.toml")} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("the denied command's result %q lacks %q", r.Output, want)
		}
	}
	if _, err := os.Stat(filepath.Join(h.u.ws, "README.md")); err != nil {
		t.Errorf("the denied rm ran: %v", err)
	}

	// The audit log: the agent's session, one nested session per command
	// that ran (naming the agent's as its parent), and the command's
	// refused connect to the API in a nested session.
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var agentSession string
	nested := map[string]bool{}
	refusedAPI := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Ox struct {
				Kind, Session string
				Parent        string `json:"parent_session"`
			} `json:"oxsupervise"`
			Destination *struct{ Port int } `json:"destination"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			t.Fatalf("bad audit line %q", line)
		}
		switch {
		case rec.Ox.Kind == "session_start" && rec.Ox.Parent == "":
			agentSession = rec.Ox.Session
		case rec.Ox.Kind == "session_start":
			if rec.Ox.Parent != agentSession {
				t.Errorf("nested session %s names parent %q, want the agent's %q", rec.Ox.Session, rec.Ox.Parent, agentSession)
			}
			nested[rec.Ox.Session] = true
		case rec.Ox.Kind == "denial" && rec.Destination != nil && strconv.Itoa(rec.Destination.Port) == apiPort:
			if nested[rec.Ox.Session] && rec.Ox.Parent == agentSession {
				refusedAPI = true
			}
		}
	}
	if agentSession == "" || len(nested) < 3 {
		t.Errorf("agent session %q with %d nested sessions, want one per command that ran (3); log:\n%s", agentSession, len(nested), b)
	}
	if !refusedAPI {
		t.Errorf("no audit record of the nested command's refused connect to port %s naming both sessions; log:\n%s", apiPort, b)
	}
}

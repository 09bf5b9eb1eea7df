package doctor

import (
	"bytes"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/agent"
)

// The agents found in PATH are reported with whether their profile was
// checked against the installed version; none is said too.
func TestAgentsText(t *testing.T) {
	r := synthetic(true, false, "EPERM", []string{"landlock"}, 7, "", true)
	var none bytes.Buffer
	if err := r.WriteText(&none); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(none.String(), "agents  none") {
		t.Errorf("no agents, output:\n%s", none.String())
	}
	r.Agents = []agent.Installed{
		{Profile: "claude-code", Command: "claude", Path: "/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe", Version: "2.1.197", Checked: true},
		{Profile: "codex", Command: "codex", Path: "/usr/lib/node_modules/@openai/codex/bin/codex.js", Version: "9.0.0", Note: "the profile was checked against 0.171.0"},
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"agent claude  checked    /usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe 2.1.197 (profile claude-code)",
		"agent codex   UNCHECKED  /usr/lib/node_modules/@openai/codex/bin/codex.js 9.0.0 (profile codex); the profile was checked against 0.171.0"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, text.String())
		}
	}
}

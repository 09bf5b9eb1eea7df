//go:build linux

package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// answerer answers pending approvals as root, in order, and records what
// it saw.
type answerer struct {
	mu   sync.Mutex
	seen []Approval
}

func (a *answerer) run(ctx context.Context, t *testing.T, c *Client, replies []string) {
	for ctx.Err() == nil {
		list, err := c.Approvals(ctx)
		if err == nil {
			for _, p := range list {
				a.mu.Lock()
				n := len(a.seen)
				a.seen = append(a.seen, p)
				a.mu.Unlock()
				reply := ReplyReject
				if n < len(replies) {
					reply = replies[n]
				}
				if err := c.Reply(ctx, p.ID, reply); err != nil {
					t.Errorf("reply %s to %s: %v", reply, p.ID, err)
				}
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// The escape hatch end to end: from inside a session an unprivileged user
// asks to run an excluded command outside it; the daemon waits for an
// answer, runs it outside the sandbox after "once", remembers "always" in
// the workspace's approvals.toml (written as the user) and then approves
// without asking, refuses after "reject", and never takes an answer from
// inside a session. Every step is audited.
func TestApprovalsExcludedCommand(t *testing.T) {
	w := newWorld(t)
	if _, ok := landlockUsable(); !ok {
		t.Skip("Landlock unusable here: without it a session could write outside anyway, so the escape hatch proves nothing")
	}
	w.start(t)
	writeFile(t, filepath.Join(w.ws, ".openoxide", "config.toml"), "[sandbox]\nexcluded_commands = [\"touch\"]\n", nobody)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ans := &answerer{}
	go ans.run(ctx, t, &Client{Socket: w.socket}, []string{ReplyOnce, ReplyAlways, ReplyReject})

	script := `H=` + helper + `
"$H" ` + clientOp + ` exec touch "$OUT/a"; echo "e1=$?"
"$H" ` + clientOp + ` exec touch "$OUT/b"; echo "e2=$?"
echo '[[approval]]' >> .openoxide/approvals.toml; echo "w=$?"
"$H" ` + clientOp + ` exec touch "$OUT/c"; echo "e3=$?"
"$H" ` + clientOp + ` exec mkdir "$OUT/d"; echo "e4=$?"
"$H" ` + clientOp + ` reply a-000000000000 once; echo "r=$?"
"$H" ` + clientOp + ` sessions >/dev/null; echo "s=$?"
"$H" ` + clientOp + ` run "$PWD" true; echo "n=$?"
touch "$OUT/direct"; echo "direct=$?"
`
	res := w.runHelper(t, nobody, w.ws, []string{"OUT=" + w.outside, helperSocketEnv + "=" + w.socket}, "run", w.ws, "sh", "-c", script)
	cancel()
	for _, want := range []string{"e1=0", "e2=0", "e3=0", "e4=1", "r=1", "s=0", "n=125"} {
		if !strings.Contains(res.stdout, want+"\n") {
			t.Errorf("stdout lacks %s", want)
		}
	}
	if strings.Contains(res.stdout, "w=0") {
		t.Error("the session could write its own approvals.toml")
	}
	if strings.Contains(res.stdout, "direct=0") {
		t.Error("the session wrote outside its workspace without the escape hatch")
	}
	if !strings.Contains(res.stderr, "ERR forbidden: answering an approval is not allowed from inside a session") {
		t.Error("a reply from inside the session was not refused as such")
	}
	if !strings.Contains(res.stderr, "creating a session is not allowed from inside a session") {
		t.Error("a nested session was not refused")
	}
	if t.Failed() {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	for _, f := range []string{"a", "b", "c"} {
		if got := fileOwner(t, filepath.Join(w.outside, f)); got != nobody {
			t.Fatalf("%s created by uid %d, want the session's user %d", f, got, nobody)
		}
	}
	for _, f := range []string{"d", "direct"} {
		if exists(filepath.Join(w.outside, f)) {
			t.Fatalf("%s exists: a refused command ran", f)
		}
	}
	ans.mu.Lock()
	seen := ans.seen
	ans.mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("%d approvals were asked, want 3 (the third touch is covered by --always): %+v", len(seen), seen)
	}
	if seen[0].Kind != KindExcludedCommand || seen[0].UID != nobody || seen[0].Pattern != "touch *" {
		t.Fatalf("first approval %+v", seen[0])
	}
	if seen[2].Kind != KindUnsandboxedCommand || seen[2].Command[0] != "mkdir" {
		t.Fatalf("third approval %+v, want the unsandboxed mkdir", seen[2])
	}
	file := filepath.Join(w.ws, ApprovalsFile)
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `pattern = 'touch *'`) || strings.Count(string(b), "[[approval]]") != 1 {
		t.Fatalf("%s: %v\n%s", file, err, b)
	}
	if got := fileOwner(t, file); got != nobody {
		t.Fatalf("%s owned by %d, want the user %d", file, got, nobody)
	}
	decisions := map[string]int{}
	for _, r := range auditRecords(t, w.audit) {
		if oxField(r, "kind") == "approval" {
			a := oxField(r, "approval").(map[string]any)
			decisions[a["decision"].(string)]++
		}
	}
	// Requests: 4 pending; outcomes: once (answer + exit), always (answer +
	// exit, then reuse + exit), reject.
	if decisions["pending"] != 4 || decisions["once"] != 2 || decisions["always"] != 4 || decisions["reject"] != 1 {
		t.Fatalf("approval audit records by decision: %v", decisions)
	}
}

// allow_unsandboxed_commands = false refuses without asking anyone.
func TestApprovalsForbiddenByPolicy(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	writeFile(t, filepath.Join(w.ws, ".openoxide", "config.toml"), "[sandbox]\nexcluded_commands = [\"touch\"]\nallow_unsandboxed_commands = false\n", nobody)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ans := &answerer{}
	go ans.run(ctx, t, &Client{Socket: w.socket}, []string{ReplyOnce})
	script := helper + ` ` + clientOp + ` exec touch "$OUT/a"; echo "e=$?"`
	res := w.runHelper(t, nobody, w.ws, []string{"OUT=" + w.outside}, "run", w.ws, "sh", "-c", script)
	cancel()
	ans.mu.Lock()
	defer ans.mu.Unlock()
	if !strings.Contains(res.stdout, "e=1") || !strings.Contains(res.stderr, "allow_unsandboxed_commands = false") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	if exists(filepath.Join(w.outside, "a")) {
		t.Fatal("the forbidden command ran")
	}
	if len(ans.seen) != 0 {
		t.Fatalf("an approval was asked although policy forbids it: %+v", ans.seen)
	}
}

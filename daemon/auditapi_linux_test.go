//go:build linux

package daemon

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// sessionsIn returns the session ids of the records in lines (JSON lines).
func sessionsIn(t *testing.T, lines string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		if l == "" {
			continue
		}
		var r audit.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("GET /audit line %q: %v", l, err)
		}
		out[r.Ox.Session] = true
	}
	return out
}

// GET /audit: a user reads only the records of their own sessions (ended
// ones included), root reads everything, and a follower sees the user's
// new sessions as they happen and nothing of anyone else's.
func TestAuditThroughDaemon(t *testing.T) {
	w := newWorld(t)
	// Sessions need an account (home, name); root's through the daemon
	// keep their own audit path, so the second user is a system account.
	u, err := user.Lookup("daemon")
	if err != nil {
		t.Skipf("no account \"daemon\" to play a second user with sessions: %v", err)
	}
	second, _ := strconv.Atoi(u.Uid)
	w.start(t)
	const other = 64123
	lastSession := func() string {
		t.Helper()
		ids := startedSessions(readRecords(t, w.audit))
		if len(ids) == 0 {
			t.Fatal("no session_start record")
		}
		return ids[len(ids)-1]
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "run", w.ws, "true"); res.code != 0 {
		t.Fatalf("nobody's session: exit %d %s", res.code, res.stderr)
	}
	mine := lastSession()
	if res := w.runHelper(t, second, w.ws, nil, "run", w.ws, "true"); res.code != 0 {
		t.Fatalf("uid %d's session: exit %d %s", second, res.code, res.stderr)
	}
	theirs := lastSession()

	res := w.runHelper(t, nobody, "/", nil, "audit", "0")
	if got := sessionsIn(t, res.stdout); res.code != 0 || len(got) != 1 || !got[mine] {
		t.Fatalf("nobody reads the records of sessions %v (exit %d, %s), want only its own %s", got, res.code, res.stderr, mine)
	}
	if res := w.runHelper(t, other, "/", nil, "audit", "0"); res.code != 0 || strings.TrimSpace(res.stdout) != "" {
		t.Fatalf("a user without sessions reads %q (exit %d, %s), want nothing", res.stdout, res.code, res.stderr)
	}
	res = w.runHelper(t, 0, "/", nil, "audit", "0")
	if got := sessionsIn(t, res.stdout); !got[mine] || !got[theirs] {
		t.Fatalf("root reads the records of sessions %v, want %s and %s", got, mine, theirs)
	}
	if res := w.runHelper(t, second, "/", nil, "audit", "0"); !sessionsIn(t, res.stdout)[theirs] || sessionsIn(t, res.stdout)[mine] {
		t.Fatalf("uid %d reads %q, want its own session %s only", second, res.stdout, theirs)
	}
	for _, bad := range []string{"/audit?follow=2", "/audit?bogus=1", "/audit?pid=-1", "/audit?since=yesterday", "/audit?session=a&session=b"} {
		if st, e := rawRequest(t, w.socket, http.MethodGet, bad, nil); st != http.StatusBadRequest || e.Message == "" {
			t.Errorf("GET %s: %d %+v, want 400 naming the problem", bad, st, e)
		}
	}

	// Follow: the stream first replays the live log, then goes on.
	cmd := exec.Command(helper, clientArgs("audit", "1")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(nobody)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitFor := func(id, kind string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("follow stream ended before %s of %s", kind, id)
				}
				var r audit.Record
				json.Unmarshal([]byte(l), &r)
				if r.Ox.Session != mine && r.Ox.Session != id {
					t.Fatalf("the follower of uid %d got a record of session %q: %s", nobody, r.Ox.Session, l)
				}
				if r.Ox.Session == id && string(r.Ox.Kind) == kind {
					return
				}
			case <-timeout:
				t.Fatalf("no %s record of session %s in the follow stream", kind, id)
			}
		}
	}
	waitFor(mine, "session_start")
	if res := w.runHelper(t, second, w.ws, nil, "run", w.ws, "true"); res.code != 0 {
		t.Fatalf("uid %d's second session: exit %d %s", second, res.code, res.stderr)
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "run", w.ws, "true"); res.code != 0 {
		t.Fatalf("nobody's second session: exit %d %s", res.code, res.stderr)
	}
	// The other user's second session was logged first: had it been sent, waitFor
	// would have failed on it.
	waitFor(lastSession(), "session_stop")
}

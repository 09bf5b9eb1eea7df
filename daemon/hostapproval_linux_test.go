//go:build linux

package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// hostAnswerer answers pending hostname approvals as root by host name,
// leaving hosts without a reply pending, and records what it saw.
type hostAnswerer struct {
	mu   sync.Mutex
	seen map[string]Approval
}

func (a *hostAnswerer) run(ctx context.Context, t *testing.T, c *Client, replies map[string]string) {
	for ctx.Err() == nil {
		list, _ := c.Approvals(ctx)
		for _, p := range list {
			a.mu.Lock()
			_, old := a.seen[p.ID]
			a.seen[p.ID] = p
			a.mu.Unlock()
			reply, ok := replies[p.Host]
			if old || !ok {
				continue
			}
			if err := c.Reply(ctx, p.ID, reply); err != nil && ctx.Err() == nil {
				t.Errorf("reply %s to %s (%s): %v", reply, p.ID, p.Host, err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *hostAnswerer) hosts() map[string][]Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]Approval{}
	for _, p := range a.seen {
		out[p.Host] = append(out[p.Host], p)
	}
	return out
}

// remotePeer connects the daemon's network namespace (that of process
// daemonPID) with a veth pair to a new namespace holding addrs and a TCP
// listener on port 8080 of each: destinations that are not this host's
// own, which only a resolver answer (not the loopback rules) can admit.
func remotePeer(t *testing.T, daemonPID int, addrs ...string) {
	t.Helper()
	suffix := randHex(3)
	ns, here, there := "oxs-peer-"+suffix, "oxsa"+suffix, "oxsb"+suffix
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	inDaemon := func(args ...string) {
		t.Helper()
		run(append([]string{"nsenter", "--net=/proc/" + itoa(daemonPID) + "/ns/net", "--"}, args...)...)
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run("ip", "link", "add", here, "type", "veth", "peer", "name", there)
	// Only needed when a later step failed: a moved pair goes with its
	// namespaces.
	t.Cleanup(func() { exec.Command("ip", "link", "del", here).Run() })
	run("ip", "link", "set", here, "netns", itoa(daemonPID))
	run("ip", "link", "set", there, "netns", ns)
	inDaemon("ip", "addr", "add", "198.19.0.1/24", "dev", here)
	inDaemon("ip", "link", "set", here, "up")
	run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	run("ip", "netns", "exec", ns, "ip", "link", "set", there, "up")
	for _, a := range addrs {
		run("ip", "netns", "exec", ns, "ip", "addr", "add", a+"/24", "dev", there)
		ln := exec.Command("ip", "netns", "exec", ns, helper, listenVerb, a+":8080")
		out, _ := ln.StdoutPipe()
		if err := ln.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Process.Kill(); ln.Wait() })
		buf := make([]byte, 16)
		if n, _ := out.Read(buf); !strings.HasPrefix(string(buf[:n]), "listening") {
			t.Fatalf("listener on %s did not start: %q", a, buf[:n])
		}
	}
}

// Hostname approvals end to end on the host kernel: an unprivileged user's
// session with unknown_hosts = "ask" looks up names no rule allows. Each
// lookup waits in GET /permission; "once" answers it and the address
// connects; "reject" answers REFUSED and the address the name would have had
// stays refused (EPERM); no answer within ask_timeout_seconds is REFUSED
// too; "always" answers and is remembered in the workspace's
// approvals.toml, so a later session's lookup is answered without asking.
// Refusals are resolver audit records, answers approval records.
func TestHostnameApprovals(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	for _, tool := range []string{"nsenter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (%v): cannot build the peer network namespace", tool, err)
		}
	}
	// Host-local addresses are only ever admitted by static entries, so
	// the names point at a peer namespace behind a veth pair.
	const (
		onceIP  = "198.19.0.2"
		otherIP = "198.19.0.3"
	)
	onceAddr, otherAddr := onceIP+":8080", otherIP+":8080"
	w.dns = map[string]string{"once.ask.test": onceIP, "reject.ask.test": otherIP, "timeout.ask.test": otherIP, "always.ask.test": otherIP}
	d, dlog := w.startDaemonInNetns(t, 0)
	if strings.Contains(dlog.String(), "cgroup network layer NOT built") {
		t.Fatalf("the probe attaches sock_addr programs but the daemon did not build its network layer:\n%s", dlog.String())
	}
	remotePeer(t, d.Process.Pid, onceIP, otherIP)
	writeFile(t, filepath.Join(w.ws, ".openoxide", "config.toml"), "[network]\nunknown_hosts = \"ask\"\nask_timeout_seconds = 3\n", nobody)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ans := &hostAnswerer{seen: map[string]Approval{}}
	go ans.run(ctx, t, &Client{Socket: w.socket}, map[string]string{
		"once.ask.test": ReplyOnce, "reject.ask.test": ReplyReject, "always.ask.test": ReplyAlways})

	// Any server on port 53 will do: the session's DNS goes to its
	// resolver whatever it asks.
	lookup := func(name, connect string) string {
		return helper + " " + lookupVerb + " " + name + " " + otherIP + ":53 " + connect + "; "
	}
	// The allow list names an address nobody uses: the session is an
	// allowlist session (it has a resolver) that allows no name.
	script := lookup("once.ask.test", onceAddr) + lookup("reject.ask.test", otherAddr) +
		lookup("timeout.ask.test", otherAddr) + lookup("always.ask.test", otherAddr) + "true"
	start := time.Now()
	res := w.runHelper(t, nobody, w.ws, nil, "netrun", w.ws, "allowlist", "198.18.0.9", "sh", "-c", script)
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	want := []string{
		"once.ask.test rcode=NOERROR answer=" + onceIP + " " + onceAddr + "=ok",
		"reject.ask.test rcode=REFUSED answer= " + otherAddr + "=EPERM",
		"timeout.ask.test rcode=REFUSED answer= " + otherAddr + "=EPERM",
		"always.ask.test rcode=NOERROR answer=" + otherIP + " " + otherAddr + "=ok",
	}
	for _, line := range want {
		if !strings.Contains(res.stdout, line+"\n") {
			t.Errorf("stdout lacks %q", line)
		}
	}
	if took := time.Since(start); took > 12*time.Second {
		t.Errorf("the session took %v: the unanswered lookup was held past its 3s timeout", took)
	}
	if t.Failed() {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	}
	ids := startedSessions(readRecords(t, w.audit))
	if len(ids) != 1 {
		t.Fatalf("sessions started: %v", ids)
	}
	sid := ids[0]
	seen := ans.hosts()
	for _, host := range []string{"once.ask.test", "reject.ask.test", "timeout.ask.test", "always.ask.test"} {
		list := seen[host]
		if len(list) != 1 {
			t.Errorf("%s: %d pending approvals listed, want 1: %+v", host, len(list), list)
			continue
		}
		if a := list[0]; a.Kind != KindHostname || a.Session != sid || a.UID != nobody || a.Pattern != host || !a.Expires.After(a.Created) {
			t.Errorf("%s: approval %+v", host, a)
		}
	}

	file := filepath.Join(w.ws, ApprovalsFile)
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "kind = 'hostname'") || !strings.Contains(string(b), "pattern = 'always.ask.test'") ||
		strings.Contains(string(b), "once.ask.test") {
		t.Fatalf("%s: %v\n%s", file, err, b)
	}
	if got := fileOwner(t, file); got != nobody {
		t.Errorf("%s owned by %d, want the user %d", file, got, nobody)
	}

	// A later session: the remembered name is answered without asking.
	res = w.runHelper(t, nobody, w.ws, nil, "netrun", w.ws, "allowlist", "198.18.0.9", "sh", "-c", lookup("always.ask.test", otherAddr)+"true")
	if line := "always.ask.test rcode=NOERROR answer=" + otherIP + " " + otherAddr + "=ok"; !strings.Contains(res.stdout, line+"\n") {
		t.Fatalf("second session: stdout lacks %q\nstdout %s\nstderr %s", line, res.stdout, res.stderr)
	}
	if n := len(ans.hosts()["always.ask.test"]); n != 1 {
		t.Errorf("the remembered name was asked again (%d approvals)", n)
	}

	recs := readRecords(t, w.audit)
	refused := map[string]string{}
	decisions := map[string][]string{}
	for _, r := range recs {
		if r.Ox.Kind == audit.KindDenial && r.Ox.Layer == audit.LayerResolver && r.DNS != nil && r.Ox.Session == sid {
			refused[r.DNS.Question.Name] = r.Event.Reason
		}
		if r.Ox.Kind == audit.KindApproval && r.Ox.Approval != nil {
			decisions[r.Ox.Approval.Command] = append(decisions[r.Ox.Approval.Command], r.Ox.Approval.Decision)
		}
	}
	if refused["reject.ask.test"] != "ask-rejected" || refused["timeout.ask.test"] != "ask-timeout" || len(refused) != 2 {
		t.Errorf("resolver refusals of session %s: %v, want reject.ask.test ask-rejected and timeout.ask.test ask-timeout", sid, refused)
	}
	for host, want := range map[string]string{
		"once.ask.test": "pending once", "reject.ask.test": "pending reject", "timeout.ask.test": "pending reject",
		"always.ask.test": "pending always pending always",
	} {
		if got := strings.Join(decisions[host], " "); got != want {
			t.Errorf("approval records of %s: %q, want %q", host, got, want)
		}
	}
}

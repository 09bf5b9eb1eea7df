//go:build linux

package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// Environment of the client helper: this test binary re-executed (as an
// unprivileged user) to play the CLI against the daemon.
const (
	helperModeEnv   = "OXS_DTEST_CLIENT"
	helperSocketEnv = "OXS_DTEST_SOCKET"
)

// daemonOptsEnv passes daemonProcOpts to the helper's daemon mode.
const daemonOptsEnv = "OXS_DTEST_DAEMON"

type daemonProcOpts struct {
	Socket, ManagedDir, AuditPath, StateDir, PinDir, Parent, RegistryDir string
	// Listen are TCP addresses the daemon process accepts on (in its
	// network namespace, which its sessions share).
	Listen []string
	// DNS, when set, makes the daemon process serve these name -> IPv4
	// answers on loopback (in its namespace) and use that server as its
	// resolvers' upstream.
	DNS map[string]string
}

// connectVerb makes this test binary connect to one TCP address and print
// "ADDR=ok" or "ADDR=<errno name>": the probe run inside sessions.
const connectVerb = "oxs-connect"

func connectMain(addr string) int {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err == nil {
		c.Close()
		fmt.Printf("%s=ok\n", addr)
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		fmt.Printf("%s=%s\n", addr, unix.ErrnoName(errno))
	} else {
		fmt.Printf("%s=%v\n", addr, err)
	}
	return 1
}

// lookupVerb makes this test binary send one DNS A query for a name to a
// server, then connect to an address, printing one line
// "NAME rcode=RCODE answer=IP,... ADDR=ok|<errno name>": the probe of
// hostname approvals run inside sessions.
const lookupVerb = "oxs-lookup"

func lookupMain(name, server, addr string) int {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	// Longer than any ask timeout the tests set: the resolver's answer,
	// not the client's patience, must end the lookup.
	c := &dns.Client{Net: "udp", Timeout: 15 * time.Second}
	m, _, err := c.Exchange(q, server)
	rcode := "error:" + fmt.Sprint(err)
	var answers []string
	if err == nil {
		rcode = dns.RcodeToString[m.Rcode]
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				answers = append(answers, a.A.String())
			}
		}
	}
	fmt.Printf("%s rcode=%s answer=%s ", name, rcode, strings.Join(answers, ","))
	return connectMain(addr)
}

// listenVerb makes this test binary accept TCP connections on an address
// until killed: a peer in a network namespace a test creates.
const listenVerb = "oxs-listen"

func listenMain(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		c.Close()
	}
}

// serveFakeDNS answers A queries for the names of answers on a loopback
// UDP port and returns its address.
func serveFakeDNS(answers map[string]string) (string, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		ip, ok := answers[strings.TrimSuffix(strings.ToLower(q.Name), ".")]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.ParseIP(ip).To4()})
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	return pc.LocalAddr().String(), nil
}

// helper is a copy of this test binary that every user can execute.
var helper string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == session.LauncherVerb {
		os.Exit(session.LauncherMain())
	}
	if len(os.Args) > 2 && os.Args[1] == connectVerb {
		os.Exit(connectMain(os.Args[2]))
	}
	if len(os.Args) > 2 && os.Args[1] == listenVerb {
		os.Exit(listenMain(os.Args[2]))
	}
	if len(os.Args) > 4 && os.Args[1] == lookupVerb {
		os.Exit(lookupMain(os.Args[2], os.Args[3], os.Args[4]))
	}
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	if os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("/var/tmp", "oxs-dtest-bin-")
		if err != nil {
			panic(err)
		}
		os.Chmod(dir, 0o755)
		self, _ := os.Executable()
		helper = filepath.Join(dir, "oxs-dtest")
		b, err := os.ReadFile(self)
		if err == nil {
			err = os.WriteFile(helper, b, 0o755)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "copy test binary: %v\n", err)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// helperMain is the client side, run as whatever user the test chose.
// Failures print "ERR <code>: <message>" so tests can assert the reason.
func helperMain(mode string, args []string) int {
	ctx := context.Background()
	c := &Client{Socket: os.Getenv(helperSocketEnv)}
	fail := func(err error) int {
		var e *Error
		if errors.As(err, &e) {
			fmt.Fprintf(os.Stderr, "ERR %s: %s\n", e.Code, e.Message)
		} else {
			fmt.Fprintf(os.Stderr, "ERR other: %v\n", err)
		}
		return 1
	}
	printJSON := func(v any) int {
		json.NewEncoder(os.Stdout).Encode(v)
		return 0
	}
	switch mode {
	case "daemon": // a daemon in its own process, to be killed with SIGKILL
		var o daemonProcOpts
		if err := json.Unmarshal([]byte(os.Getenv(daemonOptsEnv)), &o); err != nil {
			return fail(err)
		}
		for _, addr := range o.Listen {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fail(err)
			}
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}
		var upstream []string
		if len(o.DNS) > 0 {
			addr, err := serveFakeDNS(o.DNS)
			if err != nil {
				return fail(err)
			}
			upstream = []string{addr}
		}
		self, _ := os.Executable()
		srv, err := New(Options{Socket: o.Socket, ManagedDir: o.ManagedDir, AuditPath: o.AuditPath, StateDir: o.StateDir,
			PinDir: o.PinDir, Cgroup: cgroup.Config{Parent: o.Parent}, Registry: session.Registry{Dir: o.RegistryDir},
			SelfExe: self, ApprovalTimeout: 20 * time.Second, ResolverUpstream: upstream})
		if err != nil {
			return fail(err)
		}
		if err := srv.Serve(ctx); err != nil {
			return fail(err)
		}
		return 0
	case "run": // WORKSPACE CMD...
		return RunCLI(ctx, c.Socket, args[1:], &policy.Flags{Workspace: args[0]}, os.Stderr)
	case "netrun": // WORKSPACE NET ALLOW CMD... (ALLOW: comma-separated, "-" for none)
		flags := &policy.Flags{Workspace: args[0], Net: args[1]}
		if args[2] != "-" {
			flags.AllowNet = strings.Split(args[2], ",")
		}
		return RunCLI(ctx, c.Socket, args[3:], flags, os.Stderr)
	case "attachnet": // PID NET ALLOW
		pid, _ := strconv.Atoi(args[0])
		wd, _ := os.Getwd()
		pf := PolicyFlags{Net: args[1]}
		if args[2] != "-" {
			pf.AllowNet = strings.Split(args[2], ",")
		}
		res, err := c.Attach(ctx, AttachRequest{PID: pid, Dir: wd, Policy: pf})
		if err != nil {
			return fail(err)
		}
		return printJSON(res)
	case "attach": // PID
		pid, _ := strconv.Atoi(args[0])
		wd, _ := os.Getwd()
		res, err := c.Attach(ctx, AttachRequest{PID: pid, Dir: wd, Policy: PolicyFlags{Net: "full"}})
		if err != nil {
			return fail(err)
		}
		return printJSON(res)
	case "sessions":
		list, err := c.Sessions(ctx)
		if err != nil {
			return fail(err)
		}
		return printJSON(list)
	case "stop": // ID
		if err := c.Stop(ctx, args[0]); err != nil {
			return fail(err)
		}
		return 0
	case "flood": // N: open N connections, report how many the daemon
		// refused at once (503 busy), hold the rest until stdin closes.
		n, _ := strconv.Atoi(args[0])
		conns := make([]net.Conn, 0, n)
		for range n {
			conn, err := net.Dial("unix", c.Socket)
			if err != nil {
				return fail(err)
			}
			// A well-formed request, then the connection is kept open.
			io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			conns = append(conns, conn)
		}
		answers := make([]string, n)
		var wg sync.WaitGroup
		for i, conn := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A refused connection is answered 503 and closed; an
				// admitted one answers 200 and stays open (kept alive).
				conn.SetReadDeadline(time.Now().Add(time.Second))
				b, _ := io.ReadAll(conn)
				answers[i] = string(b)
			}()
		}
		wg.Wait()
		held, refused := 0, 0
		for _, a := range answers {
			switch {
			case strings.HasPrefix(a, "HTTP/1.1 200"):
				held++
			case strings.HasPrefix(a, "HTTP/1.1 503") && strings.Contains(a, `"code":"busy"`):
				refused++
			default:
				fmt.Printf("unexpected answer %q\n", a)
			}
		}
		fmt.Printf("held=%d refused=%d\n", held, refused)
		io.Copy(io.Discard, os.Stdin)
		for _, conn := range conns {
			conn.Close()
		}
		return 0
	case "audit": // FOLLOW (0|1): print the raw lines GET /audit sends
		err := c.AuditTail(ctx, AuditQuery{Follow: args[0] == "1"}, func(line []byte) error {
			_, err := fmt.Printf("%s\n", line)
			return err
		})
		if err != nil {
			return fail(err)
		}
		return 0
	case "reply": // ID REPLY
		if err := c.Reply(ctx, args[0], args[1]); err != nil {
			return fail(err)
		}
		return 0
	case "exec": // CMD...
		wd, _ := os.Getwd()
		final, err := c.Exec(ctx, ExecRequest{Argv: args, Env: os.Environ(), Dir: wd},
			[3]*os.File{os.Stdin, os.Stdout, os.Stderr}, func(e Event) {
				fmt.Fprintf(os.Stderr, "event %s %s\n", e.Event, e.Message)
			})
		if err != nil {
			return fail(err)
		}
		if final.Event != "exit" {
			fmt.Fprintf(os.Stderr, "ERR %s: %s\n", final.Event, final.Message)
			if final.Code == 0 {
				return 1
			}
		}
		return final.Code
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon creates cgroups, runs sessions as other users and reads peer credentials of other users")
	}
}

// cgroup2Available probes independently of the cgroup package.
func cgroup2Available(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || !bytes.Contains(b, []byte(" - cgroup2 ")) {
		t.Skip("no cgroup2 mount: sessions cannot be created here")
	}
}

// landlockUsable probes Landlock with the raw syscall.
func landlockUsable() (int, bool) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return int(v), errno == 0 && v >= 3
}

type syncBuffer = testutil.SyncBuffer

// world is one test's daemon and scratch directories. It lives below
// /var/tmp because /tmp is a default writable root of every session.
type world struct {
	base, socket, ws, outside, audit string
	opts                             Options
	srv                              *Server
	log                              *syncBuffer
	stop                             func()
	// dns are the answers of the fake upstream of a daemon started by
	// startDaemonInNetns (none: the daemon uses /etc/resolv.conf).
	dns map[string]string
}

const nobody = 65534

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	requireRoot(t)
	cgroup2Available(t)
	base, err := os.MkdirTemp("/var/tmp", "oxs-dtest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	w := &world{base: base, socket: filepath.Join(base, "run", "api.sock"), ws: filepath.Join(base, "ws"),
		outside: filepath.Join(base, "outside"), audit: filepath.Join(base, "log", "audit.jsonl"), log: &syncBuffer{}}
	for _, d := range []string{w.ws, w.outside, filepath.Join(base, "managed"), filepath.Join(base, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chown(w.ws, nobody, nobody)
	// World-writable: only the sandbox, not file permissions, keeps a
	// session out of it.
	os.Chmod(w.outside, 0o777)
	parent := "oxs-dtest-" + randHex(4)
	w.opts = Options{
		Socket: w.socket, ManagedDir: filepath.Join(base, "managed"), AuditPath: w.audit,
		ApprovalTimeout: 20 * time.Second,
		Cgroup:          cgroup.Config{Parent: parent},
		Registry:        session.Registry{Dir: filepath.Join(base, "registry")},
		StateDir:        filepath.Join(base, "state"),
		PinDir:          filepath.Join(base, "bpf"),
		SelfExe:         helper, Log: w.log,
		adoptGrace: -1,
	}
	t.Cleanup(func() {
		if w.stop != nil {
			w.stop()
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", w.log.String())
		}
		if mnt, err := cgroup.Cgroup2Mount(); err == nil {
			ids, _ := cgroup.ListSessions(w.opts.Cgroup)
			for _, id := range ids {
				session.Stop(context.Background(), w.opts.Cgroup, w.opts.Registry, id)
			}
			os.Remove(filepath.Join(mnt, parent))
		}
		os.RemoveAll(base)
	})
	return w
}

func (w *world) start(t *testing.T) {
	t.Helper()
	srv, err := New(w.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	w.srv = srv
	w.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10s")
		}
		w.stop = nil
	}
	// Starting builds the BPF layers (verifier time grows with machine
	// load) and adopts sessions: a liveness bound, not a speed assertion.
	deadline := time.Now().Add(60 * time.Second)
	for !Available(w.socket) {
		select {
		case err := <-done:
			t.Fatalf("daemon exited: %v\n%s", err, w.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not answering on %s\n%s", w.socket, w.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type helperResult struct {
	code           int
	stdout, stderr string
}

// runHelper runs the client helper as uid (gid = uid) in dir.
func (w *world) runHelper(t *testing.T, uid int, dir string, env []string, mode string, args ...string) helperResult {
	t.Helper()
	cmd := exec.Command(helper, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", helperModeEnv + "=" + mode, helperSocketEnv + "=" + w.socket}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	err := cmd.Run()
	res := helperResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("helper %s: %v", mode, err)
	}
	return res
}

// rawRequest sends bytes on a fresh connection and returns the status and
// body of the answer.
func rawRequest(t *testing.T, socket, method, path string, body []byte) (int, Error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, _ := http.NewRequest(method, "http://x"+path, bytes.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e Error
	if resp.StatusCode/100 != 2 {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s %s: status %d with a non-JSON body %q", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, e
}

func fileOwner(t *testing.T, path string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return int(st.Uid)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// auditRecords returns the audit log's records.
func auditRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func oxField(r map[string]any, key string) any {
	ox, _ := r["oxsupervise"].(map[string]any)
	return ox[key]
}

func itoa(n int) string { return strconv.Itoa(n) }

// attachNet has the user nobody attach pid through the daemon with
// network policy net (allow: one allow entry, "-" for none) and returns
// the daemon's answer; anything but success fails the test.
func (w *world) attachNet(t *testing.T, pid int, net, allow string) AttachResult {
	t.Helper()
	res := w.runHelper(t, nobody, w.ws, nil, "attachnet", itoa(pid), net, allow)
	if res.code != 0 {
		t.Fatalf("attach: exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	var ar AttachResult
	if err := json.Unmarshal([]byte(res.stdout), &ar); err != nil || ar.Session.ID == "" {
		t.Fatalf("attach answer %q: %v", res.stdout, err)
	}
	return ar
}

func execCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	return cmd
}

func credentialFor(uid int) *syscall.Credential {
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
}

func sessionOfPID(w *world, pid int) (string, bool, error) {
	return cgroup.SessionOf(w.opts.Cgroup, pid)
}

func cgroupSessions(w *world) ([]string, error) {
	return cgroup.ListSessions(w.opts.Cgroup)
}

func writeFile(t *testing.T, path, content string, uid int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Dir(path), uid, uid)
	os.Chown(path, uid, uid)
}

// waitLog waits for a line of a daemon's log: the socket answers before
// the daemon has adopted what an earlier one left, so its adoption lines
// may come after the socket is up.
func waitLog(t *testing.T, log *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(log.String(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon log lacks %q:\n%s", want, log.String())
		}
	}
}

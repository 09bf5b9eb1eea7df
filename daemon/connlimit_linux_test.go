//go:build linux

package daemon

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// flooder is a helper process of uid holding connections to the daemon.
type flooder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// flood opens n connections as uid and returns once the helper knows how
// many the daemon refused; the rest stay open until release.
func (w *world) flood(t *testing.T, uid, n int) (f *flooder, held, refused int) {
	t.Helper()
	cmd := exec.Command(helper, clientArgs("flood", itoa(n))...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(uid)}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f = &flooder{cmd: cmd, stdin: stdin}
	t.Cleanup(f.release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held=") {
		t.Fatalf("flood helper as uid %d: %q %v", uid, line, err)
	}
	var h, r int
	for _, kv := range strings.Fields(line) {
		k, v, _ := strings.Cut(kv, "=")
		n, _ := atoiOK(v)
		if k == "held" {
			h = n
		} else {
			r = n
		}
	}
	return f, h, r
}

func atoiOK(s string) (int, bool) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, s != ""
}

func (f *flooder) release() {
	if f.stdin != nil {
		f.stdin.Close()
		f.stdin = nil
		f.cmd.Wait()
	}
}

// One user, or several, opening connections and never sending a request
// cannot take the daemon: each uid is held to its limit and all of them
// together to the total, the rest get 503 busy at once, root and users
// with free slots are still served, and released slots can be used again.
func TestConnectionLimits(t *testing.T) {
	w := newWorld(t)
	w.opts.MaxConns, w.opts.MaxConnsPerUID = 20, 8
	w.start(t)
	const other, third = 64123, 64124

	f1, held, refused := w.flood(t, nobody, 12)
	if held != 8 || refused != 4 {
		t.Fatalf("uid %d: held %d, refused %d; want 8 held (the per-user limit) and 4 refused", nobody, held, refused)
	}
	if res := w.runHelper(t, other, "/", nil, "sessions"); res.code != 0 {
		t.Fatalf("another user is not served while uid %d floods: exit %d %s", nobody, res.code, res.stderr)
	}
	f2, held, refused := w.flood(t, other, 12)
	if held != 8 || refused != 4 {
		t.Fatalf("uid %d: held %d, refused %d; want 8 and 4", other, held, refused)
	}
	f3, held, refused := w.flood(t, third, 12)
	if held != 4 || refused != 8 {
		t.Fatalf("uid %d: held %d, refused %d; want 4 (the total of 20 reached) and 8", third, held, refused)
	}
	if !Available(w.socket) {
		t.Fatal("root is not served while the connection limit is reached")
	}
	if res := w.runHelper(t, nobody, "/", nil, "sessions"); res.code == 0 || !strings.Contains(res.stderr, "ERR busy: uid 65534 already has 8 connections open") {
		t.Fatalf("a user at the limit was served: exit %d %q", res.code, res.stderr)
	}
	f1.release()
	f2.release()
	f3.release()
	// The daemon notices closed connections asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, held, refused := w.flood(t, nobody, 8)
		f.release()
		if held == 8 && refused == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the floods ended uid %d gets %d of 8 connections (%d refused): slots were not released", nobody, held, refused)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A client that stops sending mid-headers or mid-body is disconnected
// after the header or body timeout, and the daemon keeps serving; a run
// request, whose connection lives as long as its session, is not cut by
// the body timeout.
func TestSlowClients(t *testing.T) {
	w := newWorld(t)
	w.opts.headerTimeout, w.opts.bodyTimeout = time.Second, time.Second
	w.start(t)
	for _, tc := range []struct {
		name, send string
		// answer is what the daemon's last words must contain ("" = none).
		answer string
	}{
		{"headers", "GET /health HTTP/1.1\r\nHost: x\r\n", ""},
		{"body", "POST /permission/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tool\":", "read request body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := make([]net.Conn, 5)
			for i := range conns {
				c, err := net.Dial("unix", w.socket)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatal(err)
				}
				conns[i] = c
			}
			start := time.Now()
			for _, c := range conns {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				b, err := io.ReadAll(c)
				if err != nil {
					t.Fatalf("connection still open %v after it stalled: %v", time.Since(start), err)
				}
				if tc.answer != "" && !strings.Contains(string(b), tc.answer) {
					t.Errorf("last answer %q, want one naming %q", b, tc.answer)
				}
			}
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("stalled connections closed after %v, want about the 1s timeout", took)
			}
			if !Available(w.socket) {
				t.Fatal("the daemon stopped serving after slow clients")
			}
			if strings.Contains(w.log.String(), "panic serving") {
				t.Fatalf("a stalled client made a request handler panic:\n%s", w.log.String())
			}
		})
	}
	res := w.runHelper(t, nobody, w.ws, nil, "run", w.ws, "sh", "-c", "sleep 2.5; exit 3")
	if res.code != 3 {
		t.Fatalf("a run outliving the body timeout: exit %d, want 3 (its own)\nstderr %s", res.code, res.stderr)
	}
}

//go:build linux

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// helperSocketEnv tells the client helper (this test binary re-executed as
// an unprivileged user to play the CLI against the daemon: clientArgs)
// where the daemon's socket is.
const helperSocketEnv = "OXS_DTEST_SOCKET"

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

// ops are what the test binary does as a helper process (testutil.RunOp):
// "client MODE ARGS..." is helperMain, the network probes are
// netprobes_linux_test.go's.
var ops = map[string]testutil.Op{
	"client":  func(a []string) int { return helperMain(a[0], a[1:]) },
	"connect": func(a []string) int { return connectMain(a[0]) },
	"listen":  func(a []string) int { return listenMain(a[0]) },
	"lookup":  func(a []string) int { return lookupMain(a[0], a[1], a[2]) },
}

// clientOp, followed by a mode and its arguments, makes the helper run
// helperMain (in scripts: "$H" clientOp exec touch ...).
var clientOp = testutil.OpArgs("client")[0]

// clientArgs is the command line, after the helper's path, that runs
// helperMain in mode with args.
func clientArgs(mode string, args ...string) []string {
	return testutil.OpArgs("client", append([]string{mode}, args...)...)
}

// helper is a copy of this test binary that every user can execute.
var helper string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == session.LauncherVerb {
		os.Exit(session.LauncherMain())
	}
	testutil.RunOp(ops)
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
		// Network rules are under test: without BPF-LSM the policy's
		// filesystem rules need the network-only boundary asked for.
		res, err := c.Attach(ctx, AttachRequest{PID: pid, Dir: wd, Policy: pf, NetworkOnly: true})
		if err != nil {
			return fail(err)
		}
		return printJSON(res)
	case "attach", "attachstrict": // PID
		// attach asks for the network-only boundary (the tests using it
		// are about who may attach what); attachstrict does not.
		pid, _ := strconv.Atoi(args[0])
		wd, _ := os.Getwd()
		res, err := c.Attach(ctx, AttachRequest{PID: pid, Dir: wd, Policy: PolicyFlags{Net: "full"}, NetworkOnly: mode == "attach"})
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

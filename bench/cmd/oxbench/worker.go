//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"

	"time"

	"github.com/miekg/dns"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/bench/internal/stats"
	"github.com/openoxide/oxsupervise/bench/internal/work"
)

// runWorker is the measured side: it does the work, times it itself (so
// session start-up is not part of a filesystem figure) and prints one JSON
// object of metric -> value on stdout.
func runWorker(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "oxbench worker: kind missing (fsmicro, macro, connect, dns, auditgen)")
		return 2
	}
	fs := pflag.NewFlagSet("worker "+args[0], pflag.ContinueOnError)
	dir := fs.String("dir", "", "working directory")
	n := fs.Int("n", 1000, "iterations")
	addr := fs.String("addr", "", "address to connect to / DNS server")
	name := fs.String("name", "", "DNS name to query")
	tarball := fs.String("tar", "", "tar file to unpack")
	mod := fs.String("mod", "", "Go module to build")
	gocache := fs.String("gocache", "", "warm GOCACHE to copy before building")
	target := fs.String("target", "", "path whose creation is denied")
	rate := fs.Float64("rate", 0, "auditgen: refusals per second (0: as fast as possible)")
	op := fs.String("op", "open", "auditgen: the refused operation: open (creating --target) or connect (a TCP connect to --addr)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var out map[string]float64
	var err error
	switch args[0] {
	case "fsmicro":
		out, err = work.FSMicro(*dir, *n)
	case "macro":
		out, err = macro(*dir, *tarball, *mod, *gocache)
	case "connect":
		out, err = connectLoop(*addr, *n)
	case "dns":
		out, err = dnsLoop(*addr, *name, *n)
	case "auditgen":
		out, err = auditGen(*op, *target, *addr, *n, *rate)
	default:
		err = fmt.Errorf("unknown worker kind %q", args[0])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "oxbench worker %s: %v\n", args[0], err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "oxbench worker:", err)
		return 1
	}
	return 0
}

// macro unpacks the tree, runs git on it and builds the module, timing
// each step as the wall time of the real tool.
func macro(dir, tarball, mod, gocache string) (map[string]float64, error) {
	if dir == "" || tarball == "" || mod == "" || gocache == "" {
		return nil, fmt.Errorf("--dir, --tar, --mod and --gocache are required")
	}
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	timed := func(metric string, cwd string, env []string, name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), env...)
		start := time.Now()
		b, err := cmd.CombinedOutput()
		if metric != "" {
			out[metric] = float64(time.Since(start).Nanoseconds())
		}
		if err != nil {
			return fmt.Errorf("%s %v: %w: %s", name, args, err, b)
		}
		return nil
	}
	gitEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b"}
	if err := timed("untar 20k files", tree, nil, "tar", "-xf", tarball); err != nil {
		return nil, err
	}
	if err := timed("", tree, gitEnv, "git", "init", "-q"); err != nil {
		return nil, err
	}
	if err := timed("git add -A", tree, gitEnv, "git", "add", "-A"); err != nil {
		return nil, err
	}
	if err := timed("git status", tree, gitEnv, "git", "status", "--porcelain"); err != nil {
		return nil, err
	}
	cache := filepath.Join(dir, "gocache")
	if err := timed("", dir, nil, "cp", "-a", gocache, cache); err != nil {
		return nil, err
	}
	goEnv := []string{"GOCACHE=" + cache, "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off", "GOTMPDIR=" + dir, "GOTELEMETRY=off"}
	gobin := filepath.Join(goroot(), "bin", "go")
	if err := timed("go build (20 pkgs)", mod, goEnv, gobin, "build", "./..."); err != nil {
		return nil, err
	}
	return out, nil
}

func goroot() string {
	if r := os.Getenv("OXBENCH_GOROOT"); r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "/usr/local/go"
	}
	return string(trimNL(out))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func connectLoop(addr string, n int) (map[string]float64, error) {
	if _, err := work.PerOp(min(n, 50), func(int) error { return dialClose(addr) }); err != nil {
		return nil, err
	}
	ns, err := work.BatchedPerOp(n, func(int) error { return dialClose(addr) })
	if err != nil {
		return nil, err
	}
	return map[string]float64{"connect+close": ns}, nil
}

func dialClose(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// dnsLoop sends n queries one after another and reports the latency
// quantiles of single queries.
func dnsLoop(server, name string, n int) (map[string]float64, error) {
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	lat := make([]float64, 0, n)
	for i := 0; i < n+20; i++ {
		start := time.Now()
		m, _, err := c.Exchange(q, server)
		d := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("query %s at %s: %w", name, server, err)
		}
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 {
			return nil, fmt.Errorf("query %s at %s: rcode %s, %d answers", name, server, dns.RcodeToString[m.Rcode], len(m.Answer))
		}
		if i >= 20 { // the first queries warm both paths up
			lat = append(lat, float64(d.Nanoseconds()))
		}
	}
	return map[string]float64{"query p50": stats.Median(lat), "query p99": stats.Quantile(lat, 0.99)}, nil
}

// auditGen provokes n refused creations of target, as fast as it can or at
// rate per second; each one is a Landlock denial the kernel audits.
func auditGen(op, target, addr string, n int, rate float64) (map[string]float64, error) {
	var attempt func() (refused bool, err error)
	switch op {
	case "open":
		if target == "" {
			return nil, fmt.Errorf("--target is required")
		}
		attempt = func() (bool, error) {
			fd, err := unix.Open(target, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
				unix.Unlink(target)
				return false, fmt.Errorf("creating %s was allowed: the generator is not confined", target)
			}
			return err == unix.EACCES || err == unix.EPERM, nil
		}
	case "connect":
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || !ap.Addr().Is4() {
			return nil, fmt.Errorf("--addr %q: want IPV4:PORT", addr)
		}
		sa := &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
		attempt = func() (bool, error) {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return false, err
			}
			defer unix.Close(fd)
			err = unix.Connect(fd, sa)
			if err == nil || err == unix.EINPROGRESS {
				return false, fmt.Errorf("connecting to %s was allowed: the generator is not confined", addr)
			}
			return err == unix.EPERM, nil
		}
	default:
		return nil, fmt.Errorf("--op %q: want open or connect", op)
	}
	denied := 0
	start := time.Now()
	for i := 0; i < n; i++ {
		if rate > 0 {
			if wait := time.Duration(float64(i)/rate*1e9) - time.Since(start); wait > 0 {
				time.Sleep(wait)
			}
		}
		refused, err := attempt()
		if err != nil {
			return nil, err
		}
		if refused {
			denied++
		}
	}
	el := time.Since(start)
	return map[string]float64{"denied": float64(denied), "ns": float64(el.Nanoseconds()), "pid": float64(os.Getpid())}, nil
}

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

// netFixture is an egress Enforcer attached to a parent group private to
// this run, with child groups that workers are started in.
type netFixture struct {
	parent string
	events *loader.EventMaps
	enf    *egress.Enforcer
	groups []string
}

func newNetFixture(cfg egress.Config) (*netFixture, error) {
	mount, err := cgroup.Cgroup2Mount()
	if err != nil {
		return nil, fmt.Errorf("find cgroup2: %w", err)
	}
	parent := filepath.Join(mount, fmt.Sprintf("oxbench-%d", os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create parent group: %w", err)
	}
	// Nobody reads the refusals: the workloads are allowed traffic.
	events, err := loader.NewEventMaps(loader.DefaultRingSize)
	if err != nil {
		os.Remove(parent)
		return nil, err
	}
	cfg.Events = events
	enf, err := egress.Attach(parent, cfg)
	if err != nil {
		events.Close()
		os.Remove(parent)
		return nil, err
	}
	return &netFixture{parent: parent, events: events, enf: enf}, nil
}

// group creates a child group; with n it becomes a session.
func (f *netFixture) group(name string, n *policy.Network) (string, error) {
	dir := filepath.Join(f.parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	f.groups = append(f.groups, dir)
	if n != nil {
		id, err := cgroup.ID(dir)
		if err != nil {
			return "", err
		}
		if err := f.enf.AddSession(id, *n); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func (f *netFixture) Close() error {
	var errs []error
	for i := len(f.groups) - 1; i >= 0; i-- {
		if id, err := cgroup.ID(f.groups[i]); err == nil {
			f.enf.RemoveSession(id) // not every group is a session
		}
		errs = append(errs, os.Remove(f.groups[i]))
	}
	errs = append(errs, f.enf.Close(), f.events.Close(), os.Remove(f.parent))
	return errors.Join(errs...)
}

// inGroup runs a worker with its first instruction already in the group
// dir (clone into the cgroup), or in the caller's group when dir is "".
func inGroup(ctx context.Context, dir string, argv []string) (map[string]float64, error) {
	if dir == "" {
		return workerJSON(ctx, "", argv)
	}
	fd, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, lastLines(stderr.String(), 3))
	}
	return parseWorker(out)
}

func netSuite(ctx context.Context, e *env) ([]*report, error) {
	// The upstream the session resolver forwards to: a loopback server
	// answering one name, so the figure measures the resolver, not the
	// internet.
	upstream, stopUpstream, err := startZone("example.test.", netip.MustParseAddr("198.18.0.1"))
	if err != nil {
		return nil, err
	}
	defer stopUpstream()
	f, err := newNetFixture(egress.Config{Resolver: egress.ResolverConfig{Upstream: []string{upstream}}})
	if err != nil {
		return nil, fmt.Errorf("attach egress programs: %w", err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "oxbench: net cleanup:", err)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	plain, err := f.group("plain", nil)
	if err != nil {
		return nil, err
	}
	sess, err := f.group("session", &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackAll,
		Allow: []policy.NetRule{{Host: "example.test"}}})
	if err != nil {
		return nil, err
	}
	n := e.n(5000, 500)
	connect := []string{e.self, "worker", "connect", "--addr", ln.Addr().String(), "--n", fmt.Sprint(n)}
	conn := &figure{
		id: "net-connect", title: "connect()+close() to a loopback listener, with and without the egress programs",
		command: e.commandFor("net"), metrics: []string{"connect+close"}, unit: "ns", rounds: e.n(15, 4),
		variants: []variant{
			{"no programs (outside the parent group)", func(ctx context.Context, _ int) (map[string]float64, error) { return inGroup(ctx, "", connect) }},
			{"programs attached, group is not a session", func(ctx context.Context, _ int) (map[string]float64, error) { return inGroup(ctx, plain, connect) }},
			{"session (allowlist, loopback all)", func(ctx context.Context, _ int) (map[string]float64, error) { return inGroup(ctx, sess, connect) }},
		},
		notes: []string{fmt.Sprintf("Per trial: %d TCP connect+close pairs in batches of 500, the median batch's time per pair from a worker process started directly in the cgroup (clone3 CLONE_INTO_CGROUP); programs from egress.Attach (connect4/6, sendmsg4/6, recvmsg4/6, sock_create, post_bind4/6, egress floor).", n)},
	}
	rc, err := conn.measure(ctx)
	reps := []*report{rc}
	if err != nil {
		return reps, err
	}
	q := e.n(2000, 200)
	direct := []string{e.self, "worker", "dns", "--addr", upstream, "--name", "example.test", "--n", fmt.Sprint(q)}
	// Inside the session any port-53 destination is redirected to the
	// session's resolver; 127.0.0.1:53 has no server otherwise.
	viaResolver := []string{e.self, "worker", "dns", "--addr", "127.0.0.1:53", "--name", "example.test", "--n", fmt.Sprint(q)}
	res := &figure{
		id: "net-resolver", title: "DNS query latency: upstream directly vs through the session resolver",
		command: e.commandFor("net"), metrics: []string{"query p50", "query p99"}, unit: "ns", rounds: e.n(9, 3),
		variants: []variant{
			{"upstream directly, no session", func(ctx context.Context, _ int) (map[string]float64, error) { return inGroup(ctx, "", direct) }},
			{"session: redirect + resolver + trie admit", func(ctx context.Context, _ int) (map[string]float64, error) { return inGroup(ctx, sess, viaResolver) }},
		},
		notes: []string{
			fmt.Sprintf("Each trial sends %d sequential UDP A queries for an allowed name and reports that trial's p50 and p99 latency; the table's median/p90 are over trials.", q),
			"The upstream is a miekg/dns server on 127.0.0.1 answering from memory, so the difference is the resolver's added latency: connect/sendmsg redirect, policy match, forwarding, rebinding check and the allow-trie write.",
		},
	}
	rr, err := res.measure(ctx)
	reps = append(reps, rr)
	if err == nil {
		addResolverDelta(rr)
	}
	return reps, err
}

// addResolverDelta adds the added latency in absolute terms, which is
// what a user feels per lookup.
func addResolverDelta(r *report) {
	if len(r.Names) < 2 {
		return
	}
	for _, m := range r.Metrics {
		b, v := r.Samples[m][r.Names[0]], r.Samples[m][r.Names[1]]
		if len(b) == 0 || len(v) == 0 {
			continue
		}
		var d []float64
		for i := range min(len(b), len(v)) {
			d = append(d, v[i]-b[i])
		}
		r.Notes = append(r.Notes, fmt.Sprintf("Added latency at %s: median %s per query (per-round differences, %d rounds).",
			strings.TrimPrefix(m, "query "), r.format(medianOf(d)), len(d)))
	}
}

// startZone serves name -> addr on a loopback UDP port.
func startZone(name string, addr netip.Addr) (string, func(), error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(name, func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if len(req.Question) == 1 && req.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: addr.AsSlice()})
		}
		w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		return "", nil, fmt.Errorf("upstream DNS server did not start")
	}
	return pc.LocalAddr().String(), func() { srv.Shutdown() }, nil
}

//go:build linux

package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

// Enforcer holds the network programs attached on one sessions' parent
// cgroup and the per-session state written into their maps.
type Enforcer struct {
	mu    sync.Mutex
	objs  loader.NetObjects
	links []link.Link
	// linkNames name the links by their programs, in order (pins).
	linkNames []string
	resolver  *Resolver
	sessions  map[uint64]*session
	// local keeps net_local current once the first session is added.
	local *localRoutes
	stop  chan struct{}
	swept sync.WaitGroup
}

// sweepInterval is how often expired resolver entries leave the trie. The
// programs already ignore them; sweeping only frees map space.
const sweepInterval = 30 * time.Second

type trieKey struct {
	addr [16]byte
	bits int // address bits in the IPv6 space (IPv4 mapped: 96 + n)
}

type session struct {
	net     policy.Network
	entries map[trieKey][]portRange
	dns     *SessionResolver
	// names remembers which allowed name last admitted an address, so
	// refusal records can say which host an address was reached for.
	names map[netip.Addr]string
	// listeners are the net_resolvers keys of the session's resolver.
	listeners []loader.NetListenerKey
}

// Config configures an Enforcer.
type Config struct {
	// Resolver configures the per-session DNS resolvers. A session whose
	// policy is allowlist gets one; without it DNS is refused outright.
	Resolver ResolverConfig
	// Events are the maps the programs report refusals through (package
	// audit/bpfring reads them; DecodeEvent decodes them). Required.
	Events *loader.EventMaps
	// Pinned, when set, is a directory where an earlier process pinned
	// these programs, attached on the same parent, with its maps
	// (loader.PinAt of Objects): Attach opens them from there instead of
	// loading, verifying and attaching them again.
	Pinned string
}

// Attach loads the network programs and attaches them to parentCgroupDir,
// the cgroup v2 directory whose child groups are sessions. Tasks in groups
// that were never added with AddSession are not affected.
func Attach(parentCgroupDir string, cfg Config) (*Enforcer, error) {
	st, err := os.Stat(parentCgroupDir)
	if err != nil {
		return nil, fmt.Errorf("attach network programs: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("attach network programs: %s is not a directory", parentCgroupDir)
	}
	e := &Enforcer{sessions: make(map[uint64]*session)}
	if cfg.Pinned != "" {
		links, names, err := loader.LoadPinnedNetPrograms(&e.objs, cfg.Events, cfg.Pinned)
		if err != nil {
			return nil, fmt.Errorf("open pinned network programs: %w", err)
		}
		e.links, e.linkNames = links, names
	} else if err := e.load(parentCgroupDir, cfg.Events); err != nil {
		return nil, err
	}
	e.resolver = NewResolver(cfg.Resolver, e.admit)
	e.stop = make(chan struct{})
	e.swept.Add(1)
	go func() {
		defer e.swept.Done()
		tick := time.NewTicker(sweepInterval)
		defer tick.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-tick.C:
				e.sweep()
			}
		}
	}()
	return e, nil
}

// load loads the programs and attaches them to parentCgroupDir.
func (e *Enforcer) load(parentCgroupDir string, events *loader.EventMaps) error {
	if err := loader.LoadNetPrograms(&e.objs, events); err != nil {
		return fmt.Errorf("load network programs: %w", err)
	}
	attachments := []struct {
		name string
		prog *ebpf.Program
		typ  ebpf.AttachType
	}{
		{"connect4", e.objs.NetConnect4, ebpf.AttachCGroupInet4Connect},
		{"connect6", e.objs.NetConnect6, ebpf.AttachCGroupInet6Connect},
		{"sendmsg4", e.objs.NetSendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{"sendmsg6", e.objs.NetSendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{"recvmsg4", e.objs.NetRecvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		{"recvmsg6", e.objs.NetRecvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
		{"sock_create", e.objs.NetSockCreate, ebpf.AttachCGroupInetSockCreate},
		{"post_bind4", e.objs.NetPostBind4, ebpf.AttachCGroupInet4PostBind},
		{"post_bind6", e.objs.NetPostBind6, ebpf.AttachCGroupInet6PostBind},
		{"egress floor", e.objs.NetEgressFloor, ebpf.AttachCGroupInetEgress},
	}
	for _, a := range attachments {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: parentCgroupDir, Attach: a.typ, Program: a.prog})
		if err != nil {
			e.Close()
			return fmt.Errorf("attach %s to %s: %w", a.name, parentCgroupDir, err)
		}
		e.links = append(e.links, l)
		info, err := a.prog.Info()
		name := a.name
		if err == nil && info.Name != "" {
			name = info.Name
		}
		e.linkNames = append(e.linkNames, name)
	}
	return nil
}

// sweep drops expired resolver ranges from the trie. Open connections do
// not depend on them: the egress floor admits a socket's connected
// destination from socket storage.
func (e *Enforcer) sweep() error {
	now, err := bootTimeNs()
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for id, s := range e.sessions {
		for k, ranges := range s.entries {
			live, _ := mergeRanges(ranges, nil, now)
			if len(live) == len(ranges) {
				continue
			}
			if len(live) == 0 {
				key := allowKey(id, k)
				if err := e.objs.NetAllow.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					errs = append(errs, fmt.Errorf("sweep %s: %w", netip.AddrFrom16(k.addr), err))
					continue
				}
				delete(s.entries, k)
				delete(s.names, netip.AddrFrom16(k.addr).Unmap())
				continue
			}
			if err := e.writeEntry(id, k, live); err != nil {
				errs = append(errs, err)
				continue
			}
			s.entries[k] = live
		}
	}
	return errors.Join(errs...)
}

// Close detaches the programs, stops every session's resolver and frees
// the maps. Sessions still running lose their network confinement, so
// callers close the Enforcer only after the sessions are gone.
func (e *Enforcer) Close() error {
	if e.stop != nil {
		close(e.stop)
		e.swept.Wait()
		e.stop = nil
	}
	e.mu.Lock()
	sessions := e.sessions
	e.sessions = map[uint64]*session{}
	var errs []error
	for _, l := range e.links {
		errs = append(errs, l.Close())
	}
	e.links, e.linkNames = nil, nil
	e.mu.Unlock()
	// Resolvers stop outside the lock: a query in flight may be waiting
	// for it in admit, and stopping waits for that query.
	for _, s := range sessions {
		if s.dns != nil {
			errs = append(errs, s.dns.Close())
		}
	}
	errs = append(errs, e.objs.Close())
	return errors.Join(errs...)
}

// AddSession confines the tasks of cgroup cgroupID to n. It writes every
// allow entry before the session entry that activates them, and undoes
// everything on failure, so a session is never half configured.
func (e *Enforcer) AddSession(cgroupID uint64, n policy.Network) (err error) {
	if err := validateNetwork(n); err != nil {
		return fmt.Errorf("session cgroup %d: %w", cgroupID, err)
	}
	if n.Loopback == "" {
		n.Loopback = policy.LoopbackNone
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.sessions[cgroupID]; ok {
		return fmt.Errorf("session cgroup %d: already has a network policy", cgroupID)
	}
	// The host's own addresses are loopback: net_local must be current
	// before the session entry makes the programs judge this session.
	if err := e.watchLocalAddrs(); err != nil {
		return fmt.Errorf("session cgroup %d: %w", cgroupID, err)
	}
	s := &session{net: n, entries: make(map[trieKey][]portRange), names: make(map[netip.Addr]string)}
	defer func() {
		if err != nil {
			e.forget(cgroupID, s)
			if s.dns != nil {
				// No query can be in flight: the session entry that
				// redirects DNS was never written.
				s.dns.Close()
			}
		}
	}()

	for _, r := range n.Allow {
		if !r.Prefix.IsValid() {
			continue
		}
		addr, nbits := trieKeyPrefix(r.Prefix)
		k := trieKey{addr: addr, bits: nbits}
		merged, err := mergeRanges(s.entries[k], toRanges(r.Ports, 0), 0)
		if err != nil {
			return fmt.Errorf("session cgroup %d: allow %s: %w", cgroupID, r.Prefix, err)
		}
		s.entries[k] = merged
	}
	for k, ranges := range s.entries {
		if err := e.writeEntry(cgroupID, k, ranges); err != nil {
			return fmt.Errorf("session cgroup %d: %w", cgroupID, err)
		}
	}

	val := loader.NetSession{Mode: modeValue(n.Policy), Loopback: loopbackValue(n.Loopback)}
	if n.Policy == policy.NetAllowlist {
		s.dns, err = e.resolver.Start(cgroupID, n)
		if err != nil {
			return fmt.Errorf("session cgroup %d: %w", cgroupID, err)
		}
		if err := e.guardResolver(cgroupID, s, s.dns.Addrs()); err != nil {
			return fmt.Errorf("session cgroup %d: %w", cgroupID, err)
		}
		setResolverAddrs(&val, s.dns.Addrs())
	}
	// Only now is the session visible to the programs.
	e.sessions[cgroupID] = s
	if err := e.objs.NetSessions.Update(cgroupID, &val, ebpf.UpdateNoExist); err != nil {
		delete(e.sessions, cgroupID)
		return fmt.Errorf("session cgroup %d: write session entry: %w", cgroupID, err)
	}
	return nil
}

// RemoveSession drops a session's network state. Its tasks (if any are
// left) become unconfined, so call it after the session's cgroup is empty.
func (e *Enforcer) RemoveSession(cgroupID uint64) error {
	e.mu.Lock()
	s, ok := e.sessions[cgroupID]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("session cgroup %d: no network policy", cgroupID)
	}
	err := e.forget(cgroupID, s)
	e.mu.Unlock()
	// Outside the lock, as in Close.
	if s.dns != nil {
		if cerr := s.dns.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("session cgroup %d: %w", cgroupID, cerr))
		}
	}
	return err
}

// forget removes everything AddSession wrote into the maps; e.mu is held.
// The caller stops the session's resolver.
func (e *Enforcer) forget(cgroupID uint64, s *session) error {
	var errs []error
	if err := e.objs.NetSessions.Delete(cgroupID); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("delete session entry: %w", err))
	}
	delete(e.sessions, cgroupID)
	for k := range s.entries {
		key := allowKey(cgroupID, k)
		if err := e.objs.NetAllow.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete allow entry: %w", err))
		}
	}
	for _, key := range s.listeners {
		if err := e.objs.NetResolvers.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete resolver listener entry: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("session cgroup %d: %w", cgroupID, err)
	}
	return nil
}

// admit is the resolver's way into the trie: addr becomes reachable on
// ports until ttl from now (CLOCK_BOOTTIME, what the programs compare).
func (e *Enforcer) admit(cgroupID uint64, name string, addr netip.Addr, ports []policy.PortRange, ttl time.Duration) error {
	now, err := bootTimeNs()
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sessions[cgroupID]
	if !ok {
		return fmt.Errorf("admit %s: session cgroup %d is gone", addr, cgroupID)
	}
	a, nbits := trieKeyPrefix(netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
	k := trieKey{addr: a, bits: nbits}
	merged, err := mergeRanges(s.entries[k], toRanges(ports, now+uint64(ttl)), now)
	if err != nil {
		return fmt.Errorf("admit %s: %w", addr, err)
	}
	if err := e.writeEntry(cgroupID, k, merged); err != nil {
		return fmt.Errorf("admit %s: %w", addr, err)
	}
	s.entries[k] = merged
	s.names[addr.Unmap()] = name
	return nil
}

// Hostname returns the allowed name whose resolution last admitted addr
// for the session, if any: the audit layer adds it to refusal records
// (destination.domain) because the kernel only sees addresses.
func (e *Enforcer) Hostname(cgroupID uint64, addr netip.Addr) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sessions[cgroupID]
	if !ok {
		return "", false
	}
	name, ok := s.names[addr.Unmap()]
	return name, ok
}

func (e *Enforcer) writeEntry(cgroupID uint64, k trieKey, ranges []portRange) error {
	key := allowKey(cgroupID, k)
	val := loader.NetAllowVal{Prefixlen: key.Prefixlen, Nranges: uint32(len(ranges))}
	for i, r := range ranges {
		val.Ranges[i] = loader.NetPortRange{First: r.First, Last: r.Last, ExpiresNs: r.Expires}
	}
	if err := e.objs.NetAllow.Update(&key, &val, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write allow entry %s/%d: %w", netip.AddrFrom16(k.addr), k.bits, err)
	}
	return nil
}

func allowKey(cgroupID uint64, k trieKey) loader.NetAllowKey {
	// The trie compares bytes most significant bit first; the BPF side
	// stores the id halves with bpf_htonl, so do the same here.
	return loader.NetAllowKey{
		Prefixlen: uint32(64 + k.bits),
		CgidHi:    bits.ReverseBytes32(uint32(cgroupID >> 32)),
		CgidLo:    bits.ReverseBytes32(uint32(cgroupID)),
		Addr:      k.addr,
	}
}

func modeValue(p policy.NetPolicy) uint32 {
	switch p {
	case policy.NetAllowlist:
		return 1
	case policy.NetFull:
		return 2
	}
	return 0
}

func loopbackValue(l policy.Loopback) uint32 {
	switch l {
	case policy.LoopbackSession:
		return 1
	case policy.LoopbackAll:
		return 2
	}
	return 0
}

func setResolverAddrs(val *loader.NetSession, a ResolverAddrs) {
	if a.UDP4.IsValid() {
		b := a.UDP4.Addr().As4()
		val.Dns4Addr = binary.NativeEndian.Uint32(b[:]) // network order in memory
		val.Dns4UdpPort = a.UDP4.Port()
		val.Dns4TcpPort = a.TCP4.Port()
	}
	if a.UDP6.IsValid() {
		b := a.UDP6.Addr().As16()
		for i := range val.Dns6Addr {
			val.Dns6Addr[i] = binary.NativeEndian.Uint32(b[4*i:])
		}
		val.Dns6UdpPort = a.UDP6.Port()
		val.Dns6TcpPort = a.TCP6.Port()
	}
}

func bootTimeNs() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, fmt.Errorf("read CLOCK_BOOTTIME: %w", err)
	}
	return uint64(ts.Nano()), nil
}

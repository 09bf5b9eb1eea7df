//go:build linux

package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/loader"
)

// The host's own addresses are loopback to the rules: a session that may
// not reach 127.0.0.1:631 must not reach the same service bound to
// 0.0.0.0 through eth0's address either. The kernel delivers such a
// destination over lo, which the egress floor sees; net_local lets the
// socket hooks refuse it up front, with an errno instead of a dropped SYN.
//
// "Delivered here" is what the kernel's own local routes say: every
// address of an interface gets one, and so do AnyIP prefixes (ip route
// add local 10.9.0.0/16 dev lo), subnet broadcasts and IPv6 anycast
// addresses. localRoutes keeps net_local equal to those routes in the
// enforcer's network namespace: subscribed to rtnetlink's route groups
// first, then a full dump, so a change between the two is replayed after
// the dump. A lost notification (ENOBUFS) triggers a new dump. Either way
// of being out of date fails closed: a stale prefix is refused as
// loopback, a missing one is dropped by the floor (it still leaves over lo).
type localRoutes struct {
	m *ebpf.Map
	// sock is the rtnetlink socket, non-blocking and in the Go runtime's
	// poller: waiting for a notification holds no thread, and closing it
	// ends the wait.
	sock *os.File
	// holders counts the routes that make each prefix local: one prefix
	// may have several (two interfaces, two tables), and removing one
	// must not forget the others.
	holders map[netip.Prefix]map[routeID]struct{}
}

// routeID tells routes for the same prefix apart, as the kernel does.
type routeID struct {
	table, oif, priority uint32
	typ, tos             uint8
}

// staleRetry is how soon a failed route dump is tried again when no
// notification comes first.
const staleRetry = 200 * time.Millisecond

// watchLocalAddrs starts keeping net_local current, once per enforcer;
// e.mu is held. The watcher counts in e.swept and ends with e.stop, so
// Close waits for it before the maps go away.
func (e *Enforcer) watchLocalAddrs() error {
	if e.local != nil {
		return nil
	}
	if e.stop == nil {
		return errors.New("track host addresses: enforcer is closed")
	}
	select {
	case <-e.stop:
		return errors.New("track host addresses: enforcer is closed")
	default:
	}
	l, err := newLocalRoutes(e.objs.NetLocal)
	if err != nil {
		return err
	}
	e.local = l
	stop := e.stop
	e.swept.Add(1)
	go func() {
		defer e.swept.Done()
		// Closing the socket ends the watcher's wait the moment stop is
		// closed: a session's end waits for nothing.
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-stop:
			case <-done:
			}
			l.sock.Close()
		}()
		l.run()
	}()
	return nil
}

func newLocalRoutes(m *ebpf.Map) (*localRoutes, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("track host addresses: rtnetlink socket: %w", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("track host addresses: subscribe to route changes: %w", err)
	}
	// A burst (a VPN coming up with many routes) should not overflow; if
	// it does, ENOBUFS leads to a full resync.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	l := &localRoutes{m: m, sock: os.NewFile(uintptr(fd), "rtnetlink"), holders: map[netip.Prefix]map[routeID]struct{}{}}
	if err := l.resync(); err != nil {
		l.sock.Close()
		return nil, err
	}
	return l, nil
}

// run applies route notifications until the socket is closed.
func (l *localRoutes) run() {
	conn, err := l.sock.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	stale := false
	for {
		if stale {
			stale = l.resync() != nil
		}
		// A dump that failed is tried again at the next notification,
		// or after staleRetry without one.
		var deadline time.Time
		if stale {
			deadline = time.Now().Add(staleRetry)
		}
		l.sock.SetReadDeadline(deadline)
		var n int
		var from unix.Sockaddr
		var rerr error
		err := conn.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return !errors.Is(rerr, unix.EAGAIN) // EAGAIN: park until readable
		})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case err != nil:
			return // closed
		case errors.Is(rerr, unix.ENOBUFS):
			// Notifications were lost: only a dump says what is true.
			// Until one succeeds, prefixes may be missing, which the
			// floor still refuses as local.
			stale = true
			continue
		case rerr != nil:
			// Not seen in practice; a socket that keeps failing must not
			// spin the watcher.
			time.Sleep(staleRetry)
			continue
		}
		if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
			continue // only the kernel speaks for the host's routes
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.RTM_NEWROUTE:
				l.apply(m, true)
			case unix.RTM_DELROUTE:
				l.apply(m, false)
			}
		}
	}
}

// resync replaces what is known with a dump of every route.
func (l *localRoutes) resync() error {
	raw, err := syscall.NetlinkRIB(unix.RTM_GETROUTE, unix.AF_UNSPEC)
	if err != nil {
		return fmt.Errorf("track host addresses: dump routes: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(raw)
	if err != nil {
		return fmt.Errorf("track host addresses: parse route dump: %w", err)
	}
	fresh := map[netip.Prefix]map[routeID]struct{}{}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWROUTE {
			continue
		}
		if p, id, ok := parseLocalRoute(m); ok {
			if fresh[p] == nil {
				fresh[p] = map[routeID]struct{}{}
			}
			fresh[p][id] = struct{}{}
		}
	}
	// Compared with the map itself, not with what this process last
	// wrote: a map that outlived an earlier supervisor may hold stale
	// prefixes too.
	var errs []error
	var stale []netip.Prefix
	var key loader.NetLocalKey
	var v uint8
	it := l.m.Iterate()
	for it.Next(&key, &v) {
		if p := localKeyPrefix(key); fresh[p] == nil {
			stale = append(stale, p)
		}
	}
	if err := it.Err(); err != nil {
		errs = append(errs, fmt.Errorf("track host addresses: read net_local: %w", err))
	}
	for _, p := range stale {
		errs = append(errs, l.remove(p))
	}
	for p := range fresh {
		errs = append(errs, l.put(p))
	}
	l.holders = fresh
	return errors.Join(errs...)
}

func (l *localRoutes) apply(m syscall.NetlinkMessage, add bool) {
	p, id, ok := parseLocalRoute(m)
	if !ok {
		return
	}
	hs := l.holders[p]
	if add {
		if hs == nil {
			hs = map[routeID]struct{}{}
			l.holders[p] = hs
			l.put(p)
		}
		hs[id] = struct{}{}
		return
	}
	if hs == nil {
		return
	}
	delete(hs, id)
	if len(hs) == 0 {
		delete(l.holders, p)
		l.remove(p)
	}
}

func (l *localRoutes) put(p netip.Prefix) error {
	key := localKey(p)
	if err := l.m.Update(&key, uint8(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("track host addresses: add %s: %w", p, err)
	}
	return nil
}

func (l *localRoutes) remove(p netip.Prefix) error {
	key := localKey(p)
	if err := l.m.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("track host addresses: remove %s: %w", p, err)
	}
	return nil
}

// localKey is the net_local key of p (IPv4 mapped).
func localKey(p netip.Prefix) loader.NetLocalKey {
	addr, bits := trieKeyPrefix(p)
	return loader.NetLocalKey{Prefixlen: uint32(bits), Addr: addr}
}

func localKeyPrefix(k loader.NetLocalKey) netip.Prefix {
	return unmapPrefix(netip.PrefixFrom(netip.AddrFrom16(k.Addr), int(k.Prefixlen)))
}

// parseLocalRoute returns the destination prefix of an RTM_NEWROUTE or
// RTM_DELROUTE when the route delivers to this host: local (addresses,
// AnyIP), broadcast (a datagram to it is delivered here as well) or
// anycast (IPv6 subnet-router anycast).
func parseLocalRoute(m syscall.NetlinkMessage) (netip.Prefix, routeID, bool) {
	if len(m.Data) < unix.SizeofRtMsg {
		return netip.Prefix{}, routeID{}, false
	}
	family, dstLen, tos, table, typ := m.Data[0], int(m.Data[1]), m.Data[3], uint32(m.Data[4]), m.Data[7]
	switch typ {
	case unix.RTN_LOCAL, unix.RTN_BROADCAST, unix.RTN_ANYCAST:
	default:
		return netip.Prefix{}, routeID{}, false
	}
	var dst netip.Addr
	switch family {
	case unix.AF_INET:
		dst = netip.IPv4Unspecified()
	case unix.AF_INET6:
		dst = netip.IPv6Unspecified()
	default:
		return netip.Prefix{}, routeID{}, false
	}
	id := routeID{table: table, typ: typ, tos: tos}
	attrs, err := syscall.ParseNetlinkRouteAttr(&m)
	if err != nil {
		return netip.Prefix{}, routeID{}, false
	}
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.RTA_DST:
			if addr, ok := netip.AddrFromSlice(a.Value); ok {
				dst = addr
			}
		case unix.RTA_TABLE:
			if len(a.Value) == 4 {
				id.table = binary.NativeEndian.Uint32(a.Value)
			}
		case unix.RTA_OIF:
			if len(a.Value) == 4 {
				id.oif = binary.NativeEndian.Uint32(a.Value)
			}
		case unix.RTA_PRIORITY:
			if len(a.Value) == 4 {
				id.priority = binary.NativeEndian.Uint32(a.Value)
			}
		}
	}
	p, err := dst.Prefix(dstLen)
	if err != nil {
		return netip.Prefix{}, routeID{}, false
	}
	return p, id, true
}

// resolverListeners returns the net_resolvers keys of a session
// resolver's listeners.
func resolverListeners(a ResolverAddrs) []loader.NetListenerKey {
	var keys []loader.NetListenerKey
	for _, l := range []struct {
		ap    netip.AddrPort
		proto uint8
	}{
		{a.UDP4, unix.IPPROTO_UDP}, {a.TCP4, unix.IPPROTO_TCP},
		{a.UDP6, unix.IPPROTO_UDP}, {a.TCP6, unix.IPPROTO_TCP},
	} {
		if !l.ap.IsValid() {
			continue
		}
		keys = append(keys, loader.NetListenerKey{Addr: l.ap.Addr().Unmap().As16(), Port: l.ap.Port(), Protocol: l.proto})
	}
	return keys
}

// guardResolver makes the session's resolver listeners unreachable to
// every other session; e.mu is held. The keys are remembered in s first,
// so forget removes whatever was written even after a failure.
func (e *Enforcer) guardResolver(cgroupID uint64, s *session, a ResolverAddrs) error {
	for _, key := range resolverListeners(a) {
		s.listeners = append(s.listeners, key)
		if err := e.objs.NetResolvers.Update(&key, cgroupID, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("guard resolver listener %s port %d: %w", netip.AddrFrom16(key.Addr).Unmap(), key.Port, err)
		}
	}
	return nil
}

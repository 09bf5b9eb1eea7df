//go:build linux

package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// The tests re-execute their own binary as the process that runs inside a
// session (testutil.RunOp): "egress OP ARGS..." runs runHelper.
var ops = map[string]testutil.Op{
	"egress": func(args []string) int { return runHelper(args[0], args[1:]) },
}

// helperResult is what a helper prints (one JSON line per step).
type helperResult struct {
	Errno string   `json:"errno,omitempty"` // "" for success, else e.g. "EPERM"
	Err   string   `json:"err,omitempty"`   // full error text
	Addrs []string `json:"addrs,omitempty"`
	Extra string   `json:"extra,omitempty"`
}

func resultOf(err error) helperResult {
	if err == nil {
		return helperResult{}
	}
	r := helperResult{Err: err.Error(), Errno: "error"}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		r.Errno = unix.ErrnoName(errno)
	}
	return r
}

func runHelper(op string, args []string) int {
	out := json.NewEncoder(os.Stdout)
	emit := func(r helperResult) { out.Encode(r) }
	switch op {
	case "tcp":
		c, err := net.DialTimeout("tcp", args[0], 3*time.Second)
		if err == nil {
			c.Close()
		}
		emit(resultOf(err))
	case "udp-connect":
		c, err := net.Dial("udp", args[0])
		if err == nil {
			_, err = c.Write([]byte("x"))
			c.Close()
		}
		emit(resultOf(err))
	case "udp-sendto":
		emit(resultOf(udpSendto(args[0])))
	case "udp-broadcast":
		emit(resultOf(udpBroadcast(args[0])))
	case "http-direct":
		// An HTTP client that ignores proxy variables (dials directly).
		client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 3 * time.Second}
		resp, err := client.Get("http://" + args[0] + "/")
		if err == nil {
			resp.Body.Close()
		}
		emit(resultOf(err))
	case "tfo":
		emit(resultOf(tcpFastOpen(args[0])))
	case "tcp-lsrr":
		emit(resultOf(tcpLooseSourceRoute(args[0], args[1])))
	case "raw":
		emit(resultOf(openSocket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)))
	case "ping":
		emit(resultOf(openSocket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP)))
	case "ping6":
		emit(resultOf(openSocket(unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6)))
	case "raw6":
		emit(resultOf(openSocket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6)))
	case "socketpair":
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			_, err = unix.Write(fds[0], []byte("x"))
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		emit(resultOf(err))
	case "listen-connect":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			emit(resultOf(err))
			break
		}
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 3*time.Second)
		if err == nil {
			c.Close()
		}
		ln.Close()
		r := resultOf(err)
		r.Extra = ln.Addr().String()
		emit(r)
	case "listen-via":
		// Listens on args[0] and connects to the same port at host
		// args[1]: the session's own server reached through another of
		// the host's addresses.
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			emit(resultOf(err))
			break
		}
		port := ln.Addr().(*net.TCPAddr).Port
		c, err := net.DialTimeout("tcp", net.JoinHostPort(args[1], strconv.Itoa(port)), 3*time.Second)
		if err == nil {
			c.Close()
		}
		ln.Close()
		r := resultOf(err)
		r.Extra = net.JoinHostPort(args[1], strconv.Itoa(port))
		emit(r)
	case "serve-once":
		// Listens on args[0], reports the address, echoes one line for
		// one client: the session as a server.
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			emit(resultOf(err))
			break
		}
		emit(helperResult{Extra: ln.Addr().String()})
		// Never outlive a failed test waiting for a client.
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
		c, err := ln.Accept()
		if err == nil {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			var line string
			line, err = bufio.NewReader(c).ReadString('\n')
			if err == nil {
				_, err = c.Write([]byte(line))
			}
			c.Close()
		}
		ln.Close()
		emit(resultOf(err))
	case "listen-close":
		// Binds a port and closes it again, reporting the port.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			emit(resultOf(err))
			break
		}
		ln.Close()
		emit(helperResult{Extra: ln.Addr().String()})
	case "mptcp":
		// Multipath TCP (Go listeners use it by default): the kernel makes
		// the subflow sockets itself.
		emit(resultOf(mptcpConnect(args[0])))
	case "udp-loopback-echo":
		// A UDP server and an auto-bound client, both in the session.
		emit(resultOf(udpLoopbackEcho()))
	case "resolve-connect":
		// args: name, port
		addrs, err := lookup(args[0])
		if err != nil {
			r := resultOf(err)
			r.Extra = "lookup"
			emit(r)
			break
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(addrs[0], args[1]), 3*time.Second)
		if err == nil {
			c.Close()
		}
		r := resultOf(err)
		r.Addrs = addrs
		emit(r)
	case "resolve-hold":
		// args: name, port. Connects, reports, waits for a line on
		// stdin, then reports the old connection's echo and a new connect.
		addrs, err := lookup(args[0])
		if err != nil {
			r := resultOf(err)
			r.Extra = "lookup"
			emit(r)
			break
		}
		target := net.JoinHostPort(addrs[0], args[1])
		c, err := net.DialTimeout("tcp", target, 3*time.Second)
		r := resultOf(err)
		r.Addrs = addrs
		emit(r)
		if err != nil {
			break
		}
		bufio.NewReader(os.Stdin).ReadString('\n')
		c.SetDeadline(time.Now().Add(3 * time.Second))
		_, err = c.Write([]byte("ping\n"))
		if err == nil {
			_, err = bufio.NewReader(c).ReadString('\n')
		}
		emit(resultOf(err))
		c2, err := net.DialTimeout("tcp", target, 3*time.Second)
		if err == nil {
			c2.Close()
		}
		emit(resultOf(err))
	case "dns-sendto":
		// args: server ip:port, name, "udp"|"udp4"|"udp6"|"tcp". Reports the answer's
		// addresses and, for UDP, the source address the reply came from.
		emit(dnsQuery(args[0], args[1], args[2]))
	case "uring-connect":
		err := uringConnect(args[0])
		r := resultOf(err)
		if errors.Is(err, errUringUnavailable) {
			r.Errno = "uring-unavailable"
		}
		emit(r)
	case "udp-socket-fd":
		// Hands a UDP socket created here (in the session) to the parent
		// over fd 3, the unix socket the test passed in.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err == nil {
			err = unix.Sendmsg(3, []byte("x"), unix.UnixRights(fd), nil, 0)
		}
		emit(resultOf(err))
	case "bench-connect":
		n, _ := strconv.Atoi(args[1])
		start := time.Now()
		for i := 0; i < n; i++ {
			c, err := net.Dial("tcp", args[0])
			if err != nil {
				emit(resultOf(err))
				return 0
			}
			c.Close()
		}
		emit(helperResult{Extra: strconv.FormatInt(int64(time.Since(start))/int64(n), 10)})
	case "sendto-burst":
		// n UDP datagrams to args[0], each judged by sendmsg: Extra
		// counts those refused with EPERM.
		n, _ := strconv.Atoi(args[1])
		family, sa, err := sockaddr(args[0])
		if err != nil {
			emit(resultOf(err))
			return 0
		}
		fd, err := unix.Socket(family, unix.SOCK_DGRAM, 0)
		if err != nil {
			emit(resultOf(err))
			return 0
		}
		defer unix.Close(fd)
		refused := 0
		for i := 0; i < n; i++ {
			if err := unix.Sendto(fd, []byte("x"), 0, sa); errors.Is(err, unix.EPERM) {
				refused++
			}
		}
		emit(helperResult{Extra: strconv.Itoa(refused)})
	default:
		fmt.Fprintln(os.Stderr, "unknown helper op", op)
		return 2
	}
	return 0
}

func lookup(name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := r.LookupNetIP(ctx, "ip4", name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out, nil
}

func sockaddr(target string) (int, unix.Sockaddr, error) {
	ap, err := netip.ParseAddrPort(target)
	if err != nil {
		return 0, nil, err
	}
	if ap.Addr().Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}, nil
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}, nil
}

// sendOnce opens a socket of type typ for target's family, lets setup
// (may be nil) set options on it, and sends payload to target with flags:
// the sendto(2) a hook must judge.
func sendOnce(target string, typ int, payload []byte, flags int, setup func(fd int) error) error {
	family, sa, err := sockaddr(target)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(family, typ, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if setup != nil {
		if err := setup(fd); err != nil {
			return err
		}
	}
	return unix.Sendto(fd, payload, flags, sa)
}

func udpSendto(target string) error {
	return sendOnce(target, unix.SOCK_DGRAM, []byte("x"), 0, nil)
}

// udpBroadcast is udpSendto with SO_BROADCAST, which a broadcast
// destination needs before any hook is asked.
func udpBroadcast(target string) error {
	return sendOnce(target, unix.SOCK_DGRAM, []byte("x"), 0, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BROADCAST, 1); err != nil {
			return fmt.Errorf("set SO_BROADCAST: %w", err)
		}
		return nil
	})
}

// tcpLooseSourceRoute connects to target with an IPv4 loose source route
// through hop (IP_OPTIONS, which needs no privilege): the packets' header
// destination is then hop, not the address connect() names. It returns
// ETIMEDOUT when no answer came within a second.
func tcpLooseSourceRoute(target, hop string) error {
	dst, err := netip.ParseAddrPort(target)
	if err != nil {
		return err
	}
	via, err := netip.ParseAddr(hop)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	h := via.As4()
	opts := []byte{1 /* NOP */, 131 /* LSRR */, 7, 4, h[0], h[1], h[2], h[3]}
	if err := unix.SetsockoptString(fd, unix.IPPROTO_IP, unix.IP_OPTIONS, string(opts)); err != nil {
		return fmt.Errorf("set IP_OPTIONS: %w", err)
	}
	err = unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())})
	if err != unix.EINPROGRESS {
		return err
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	if n, err := unix.Poll(pfd, 1000); err != nil {
		return err
	} else if n == 0 {
		return unix.ETIMEDOUT
	}
	if soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil {
		return err
	} else if soErr != 0 {
		return unix.Errno(soErr)
	}
	return nil
}

func tcpFastOpen(target string) error {
	return sendOnce(target, unix.SOCK_STREAM, []byte("GET / HTTP/1.0\r\n\r\n"), unix.MSG_FASTOPEN, nil)
}

func openSocket(family, typ, proto int) error {
	fd, err := unix.Socket(family, typ, proto)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func dnsQuery(server, name, network string) helperResult {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	var (
		m    *dns.Msg
		from string
		err  error
	)
	if network != "tcp" {
		// Unconnected socket: sendmsg rewrites the destination, recvmsg
		// must rewrite the reply's source back.
		var pc net.PacketConn
		pc, err = net.ListenPacket(network, ":0")
		if err != nil {
			return resultOf(err)
		}
		defer pc.Close()
		var dst *net.UDPAddr
		dst, err = net.ResolveUDPAddr("udp", server)
		if err != nil {
			return resultOf(err)
		}
		wire, _ := q.Pack()
		if _, err = pc.WriteTo(wire, dst); err != nil {
			return resultOf(err)
		}
		pc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		n, src, rerr := pc.ReadFrom(buf)
		if rerr != nil {
			return resultOf(rerr)
		}
		from = src.String()
		m = new(dns.Msg)
		err = m.Unpack(buf[:n])
	} else {
		c := &dns.Client{Net: network, Timeout: 5 * time.Second}
		m, _, err = c.Exchange(q, server)
	}
	if err != nil {
		return resultOf(err)
	}
	r := helperResult{Extra: dns.RcodeToString[m.Rcode] + " " + from}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			r.Addrs = append(r.Addrs, a.A.String())
		}
	}
	return r
}

func udpLoopbackEcho() error {
	srv, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer srv.Close()
	cli, err := net.ListenPacket("udp4", "") // bound on first send
	if err != nil {
		return err
	}
	defer cli.Close()
	srv.SetDeadline(time.Now().Add(3 * time.Second))
	cli.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := cli.WriteTo([]byte("ping"), srv.LocalAddr()); err != nil {
		return err
	}
	buf := make([]byte, 16)
	_, from, err := srv.ReadFrom(buf)
	if err != nil {
		return err
	}
	if _, err := srv.WriteTo([]byte("pong"), from); err != nil {
		return err
	}
	_, _, err = cli.ReadFrom(buf)
	return err
}

const ipprotoMPTCP = 262

func mptcpConnect(target string) error {
	family, sa, err := sockaddr(target)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM, ipprotoMPTCP)
	if err != nil {
		return fmt.Errorf("mptcp unavailable: %w", err)
	}
	defer unix.Close(fd)
	return unix.Connect(fd, sa)
}

package macos

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/openoxide/oxsupervise/policy"
)

// network emits the network rules. Seatbelt can only name "*" or
// "localhost" as a remote host, so allow lists are delegated to the
// supervisor's proxy on a loopback port.
func (g *generator) network(roots []string) error {
	net := g.c.Network
	g.line("")
	g.line("; network: " + string(net.Policy) + ", loopback " + string(net.Loopback))
	// Unix-domain sockets below writable roots (build tools, test servers)
	// and explicitly listed ones; everything else (docker.sock, ssh-agent)
	// stays denied. socket(AF_UNIX) itself carries no path, so creating
	// one is a separate system-socket permission.
	g.line("(allow system-socket (socket-domain AF_UNIX))")
	g.line("(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))")
	for _, r := range roots {
		g.line("(allow network-bind (local unix-socket (subpath " + r + ")))")
		g.line("(allow network-outbound (remote unix-socket (subpath " + r + ")))")
	}
	socks := append([]string{}, net.AllowUnixSockets...)
	sort.Strings(socks)
	for _, s := range socks {
		p, err := cleanPath("allowed unix socket", s)
		if err != nil {
			return err
		}
		g.line("(allow network-outbound (remote unix-socket (literal " + g.param("UNIX_SOCKET", p) + ")))")
	}
	switch net.Loopback {
	// Binding is matched on the local endpoint as "*:*": dual-stack
	// sockets bound to 127.0.0.1 appear as ::ffff:127.0.0.1, which
	// Seatbelt's "localhost" does not match. Outbound traffic is what the
	// policy limits, and it stays governed by the remote-endpoint rules.
	case policy.LoopbackAll:
		g.line(`(allow network-bind network-inbound (local ip "*:*"))`)
		g.line(`(allow network-outbound (remote ip "localhost:*"))`)
	case policy.LoopbackSession:
		g.line(`(allow network-bind network-inbound (local ip "*:*"))`)
		g.warns = append(g.warns, "loopback \"session\" cannot be expressed in Seatbelt: the session may listen on loopback but outbound loopback connections are denied (fail closed)")
	case policy.LoopbackNone, "":
	default:
		return fmt.Errorf("unknown loopback setting %q", net.Loopback)
	}
	switch net.Policy {
	case policy.NetNone:
	case policy.NetAllowlist:
		if g.opts.ProxyPort == 0 {
			return fmt.Errorf("%w: network allowlist needs the supervisor's proxy port (Seatbelt cannot filter remote hosts)", ErrUnsupportedPolicy)
		}
		g.line(`(allow network-outbound (remote ip "localhost:` + strconv.Itoa(int(g.opts.ProxyPort)) + `"))`)
		g.warns = append(g.warns, "network allowlist on macOS is enforced by the supervisor's proxy on localhost:"+strconv.Itoa(int(g.opts.ProxyPort))+"; Seatbelt only confines the session to that port")
	case policy.NetFull:
		// Not (allow network*): that would also open every Unix-domain
		// socket (docker.sock, ssh-agent), which stay denied unless listed.
		g.line(`(allow network-outbound (remote ip "*:*"))`)
		g.line(`(allow network-bind network-inbound (local ip "*:*"))`)
		g.line("(allow system-socket (socket-domain AF_INET) (socket-domain AF_INET6))")
		g.line(`(allow network-outbound (remote unix-socket (literal "/private/var/run/mDNSResponder")))`)
		g.line("(allow mach-lookup")
		for _, name := range []string{"com.apple.dnssd.service", "com.apple.trustd.agent", "com.apple.ocspd", "com.apple.networkd"} {
			g.line("  (global-name " + stringLiteral(name) + ")")
		}
		g.line(")")
	default:
		return fmt.Errorf("unknown network policy %q", net.Policy)
	}
	if net.Policy == policy.NetFull && net.Loopback != policy.LoopbackAll {
		// Later rules win in SBPL: take loopback back out of "*:*".
		g.line(`(deny network-outbound (remote ip "localhost:*") ` + g.message("loopback", "loopback "+string(net.Loopback)) + ")")
	}
	return nil
}

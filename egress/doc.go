// Package egress enforces a session's network policy (DESIGN §4): it turns
// policy.Network into the cgroup BPF maps of bpf/net.c, attaches those
// programs once on the sessions' parent cgroup, runs the per-session DNS
// resolver that admits the addresses of allowed hostnames for their TTL,
// and decodes the kernel's refusal events (DecodeEvent), which the
// programs put in the ring buffer all oxsupervise programs share (package
// audit/bpfring reads it).
//
// Semantics worth knowing: the loopback setting applies in every policy,
// full included (the policy compiler picks its default); DNS (port 53,
// UDP and TCP) of an allowlist session always goes to the session's own
// resolver, whatever server was asked; raw and ICMP sockets are refused
// except under full; metadata and link-local addresses need an allow
// entry at least as specific as their range, so 0.0.0.0/0 does not admit
// them.
//
// Known limits, by design: an admitted IP is shared by every name hosted
// there (domain fronting); a wildcard rule admits DNS tunnelling through
// that domain; sockets created outside the session and inherited bypass
// the cgroup hooks (so run closes inherited fds); multicast looped back to
// the host is not judged as loopback; an IPv6 rule covering ::ffff:0:0/96
// (such as ::/0) also covers IPv4; AF_PACKET and other non-INET families
// need the BPF-LSM socket_create hook (cgroup sock_create only sees
// AF_INET/AF_INET6). Pathname AF_UNIX sockets are package fsguard's.
//
// Destinations the host delivers locally (its own addresses, AnyIP
// prefixes, broadcasts) are loopback: judged by the loopback setting,
// and admitted by an allow entry only when it names exactly that
// address. A session's resolver port is private to that session.
package egress

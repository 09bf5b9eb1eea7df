// Package egress enforces a session's network policy (DESIGN §4): it turns
// policy.Network into the cgroup BPF maps of bpf/net.c, attaches those
// programs once on the sessions' parent cgroup, runs the per-session DNS
// resolver that admits the addresses of allowed hostnames for their TTL,
// and decodes the kernel's refusal events.
//
// Known limits, by design: an admitted IP is shared by every name hosted
// there (domain fronting); a wildcard rule admits DNS tunnelling through
// that domain; sockets created outside the session and inherited bypass
// the cgroup hooks (so run closes inherited fds); a port bound by listen()
// without bind() is not tracked for loopback = session.
package egress

// Package daemon owns the oxsupervise supervisor daemon: an HTTP+JSON API on
// a Unix socket whose every request is authorized by the kernel-reported
// credentials of the connecting process (SO_PEERCRED, SO_PEERPIDFD), never
// by anything the client claims. It creates sessions for unprivileged users
// (policy loaded with the user's own file access and clamped by managed
// policy on the daemon side), confines their processes, lists and stops
// sessions, answers permission checks, and runs approved commands outside a
// session (the escape hatch of DESIGN §2). It also has the client the CLI
// uses when the daemon is running.
//
// # How a request travels
//
// The package is laid out along net/http's lines, one concern per file:
//
//  1. Listener (socket_linux.go, conn_linux.go, connlimit_linux.go): the
//     socket lives in a root-owned directory; every accepted connection is
//     an fdConn that collects the descriptors the client sends as
//     SCM_RIGHTS, and connections beyond the per-user and total bounds are
//     answered 503 before their request is read.
//  2. Peer credentials (peer_linux.go): at accept the kernel says who is at
//     the other end (uid, gid, pid, and a pidfd that pins the process so a
//     reused pid cannot answer for it); a peer it cannot describe is never
//     served. The connection carries that Peer in every request's context.
//  3. Middleware (middleware_linux.go): guard bounds the body in size and
//     time, turns a panic into a 500 for that request only, and closes
//     descriptors the request did not take.
//  4. Authorization (authz_linux.go): routes_linux.go lists every endpoint
//     with the access it requires (public, any peer, outside every session,
//     the owner of the session in the path, inside a session this daemon
//     manages); authorize, the one authorization middleware, checks it
//     from the peer's credentials and cgroup and hands the handler a caller
//     (who, whether admin, which session).
//  5. Handlers, one file per resource: sessions_linux.go (POST/GET
//     /sessions), attach_linux.go, stop_linux.go (DELETE and signal),
//     check_linux.go (/permission/check), approvals_linux.go (/permission),
//     exec_linux.go (/exec, the escape hatch), auditapi_linux.go (/audit).
//     hostask_linux.go is the DNS resolver's approver, the one way into the
//     approvals that does not come from a request. They decode the body
//     (api.go: the wire types and their strict decoder, shared with the
//     client), load the user's policy as the user (userpolicy_linux.go,
//     asuser_linux.go), take the caller's stdio where the request carries
//     it (stdio_linux.go) and answer with respond_linux.go's JSON and
//     event streams.
//  6. Supervisor core: the handlers call package session (Run, Attach,
//     Stop, List) with the layers of enforcement (layers_linux.go); the
//     approval store (approvalstore_linux.go: pending requests in memory,
//     "always" answers in the workspace's approvals.toml) is shared by the
//     handlers that ask and those that answer.
//
// The client side is client_linux.go (the API) and cli_linux.go (`run`
// through the daemon); exitcode.go maps a request's failure to the CLI's
// exit status for every verb.
//
// The daemon is its own program, cmd/oxsupervised, which `oxsupervise
// daemon` executes: cmdline.go is its command line (ParseCommandLine, the
// one definition both parse with) and Main. The exporters beyond the
// audit log (Prometheus, OTLP) are not imported here: Options.Exporters
// (package daemon/observe is the seam, daemon/exporters what the daemon
// program passes) starts them, observe_linux.go feeds and counts through
// it, so that the CLI, which imports this package for its client, links
// none of them.
//
// The enforcement layers (cgroup BPF network rules, BPF-LSM filesystem
// rules where usable) live in an enforcement host (package host) the
// daemon opens once at start, pinned as a new generation (host.Generations)
// so that a crash leaves attach sessions confined, and applied to every
// session it creates or attaches. Which layers a session gets is package
// planner's decision, as for the standalone CLI: a layer that cannot be
// built is logged, and its sessions get the plan's fallback or a refusal,
// never a silently weaker boundary. Sessions a previous daemon left are
// adopted at start (adopt_linux.go).
//
// The daemon keeps one session slot ready ahead of the next run request
// (slot_linux.go, session.Slot): a session group already created and a
// launcher already started into it, waiting for its spec, so that a
// request does not wait for either. The request's stdio travels with the
// spec; a request the slot cannot serve (another network namespace) starts
// its session the normal way. A waiting slot is listed nowhere, dies with
// the daemon (its launcher's parent-death signal), and the next daemon
// removes its group.
//
// A run session's commands may run nested sessions (`run` inside the
// session, docs/agents-tiers.md): the daemon serves them as a standalone
// run does (host.RunNesting), on a socket of the session's beside the API
// socket rather than through an endpoint, authorized by the caller's
// cgroup; nest_linux.go compiles their requests with the user's layers.
//
// File descriptors (a client's stdin, stdout and stderr) travel as
// SCM_RIGHTS ancillary data on the bytes of the request that needs them;
// see docs/daemon.md for the wire protocol.
package daemon

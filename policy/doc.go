// Package policy owns oxsupervise's single policy model: it reads the
// layered TOML files and CLI flags, merges them under managed locks,
// validates every key (errors carry file:line:col and a hint), and compiles
// the result into Compiled, the plain-data policy every backend (BPF-LSM,
// Landlock, cgroup network, Seatbelt, Windows) consumes. It also answers
// application-layer permission questions (Permissions.Check), splitting
// shell input into simple commands with mvdan.cc/sh.
//
// # Layers
//
// Lowest precedence first:
//
//  1. managed: /etc/oxsupervise/policy.toml, then policy.d/*.toml in
//     lexical order (the directory is LoadOptions.ManagedDir; the policy
//     verbs honour $OXSUPERVISE_MANAGED_DIR so tests and administrators can
//     try a managed policy without installing it);
//  2. ~/.openoxide/config.toml;
//  3. <workspace>/.openoxide/config.toml (loosening anything the layers
//     above decided prints a warning, since the file ships with the
//     repository);
//  4. the file given with --config;
//  5. the agent profile (package agent) of the command the session runs,
//     detected from LoadOptions.Argv or named with --agent: it adds its
//     hosts, credentials, state and rule paths to the merged lists (and
//     switches network "none" to "allowlist"), each value with the
//     profile and its citation as source; a managed lock still wins
//     (additions a lock forbids are left out with a warning), see
//     agentprofile.go;
//  6. CLI flags.
//
// Scalars override; lists replace the list of the layer above, except
// that the built-in sets (credential paths, protected names, scrubbed
// environment names) are always added and cannot be removed. Permission
// rules accumulate across layers. --writable-root and --allow-net add to
// the effective lists, and --allow-net switches a "none" network to
// "allowlist". Relative paths in files are relative to the workspace;
// relative paths in flags to the current directory; ~ is the home.
//
// # Locks
//
// Managed files may say
//
//	[managed]
//	locked = ["sandbox.mode", "network", "permissions.rules"]
//
// naming keys, whole tables, "permissions.rules" or "agent". Lower layers
// (flags included) may then only tighten: a stricter enum value (modes
// read-only < workspace-write < external-sandbox < full-access), fewer
// writable roots / allowed hosts, more denied paths, lower limits, no new
// allow rules. Anything else fails naming both the offending file:line
// and the lock's file:line. sandbox.allowed_modes can only ever be
// narrowed, locked or not, and the final mode must be in it, whichever
// layer (or flag, --yolo included) chose it.
//
// # Keys
//
//	[sandbox]     mode, approval, allowed_modes, writable_roots, exclude_slash_tmp,
//	              exclude_tmpdir_env_var, read_only_access, readable_roots,
//	              protected_subpaths, protect_git, deny_read, network (bool
//	              shorthand for network.policy), excluded_commands,
//	              allow_unsandboxed_commands
//	[network]     policy, allow, loopback, allow_unix_sockets, min_ttl_seconds,
//	              max_ttl_seconds, unknown_hosts ("deny" | "ask"),
//	              ask_timeout_seconds (1..600)
//	[env]         passthrough, scrub
//	[limits]      pids_max, memory_max ("2G" or bytes)
//	[audit]       path, journald (also send every record to systemd-journald),
//	              kernel_buffer (the BPF refusal ring buffer: a power of two,
//	              64K..1G, default "4M"; locks may only raise it)
//	[audit.otlp]  endpoint (an OTLP/HTTP collector URL the daemon exports every
//	              record to; "" = off, the default; managed files only)
//	[metrics]     listen (the daemon's Prometheus endpoint, "127.0.0.1:9464";
//	              "" = off, the default; read from the managed files only)
//	[permissions] default; [[permissions.rules]] tool, pattern, action
//	[agent.NAME.permission] default; [[agent.NAME.permission.rules]]
//	[agent.NAME.profile] (NAME a built-in profile: claude-code, codex,
//	              opencode, aider) enabled, allow, writable, read_only,
//	              passthrough (added to the profile's own)
//	[agent.NAME.command] scrub, deny_hosts, read_only (what the agent's
//	              commands lose besides the profile's credentials, hosts
//	              and state: Compiled.CommandTier, docs/agents-tiers.md)
//	[managed]     locked (managed files only)
//
// Unknown keys are errors. `oxsupervise policy show` prints every key with
// the file:line:col or flag that set it.
//
// # Resolve and bind
//
// Loading has two steps. Resolve (resolve.go) reads the layer files and
// flags, merges them under the locks and checks every value; it looks at no
// path the policy names beyond the workspace directory, so a permission
// question (`policy check`, asked by an agent hook on every tool call) costs
// the files and nothing more. Resolved.Bind (bind.go) resolves those paths
// against the filesystem as it is when a session's boundary is built:
// symlinks, device and inode (anchor.go), /tmp and $TMPDIR, and the scan of
// the writable roots for existing protected entries (scan.go), and what
// the repositories found there point git at (githooks.go: core.hooksPath,
// included config files, a pre-commit hook's config). Load is both. The
// protected set, each entry with its reason, lives in protectedset.go, the
// other built-in sets in defaults.go, the layer files in load_impl.go,
// their decoding in decode.go and the merge under locks in merge.go.
//
// # Resolver keys
//
// An address the session's DNS resolver answers for an allowed name stays
// admitted for the answer's TTL, at least min_ttl_seconds (30) and at most
// max_ttl_seconds (3600; 0 = no cap; the cap wins when the two disagree),
// so that an answer with a week-long TTL does not keep an address open for
// a week. unknown_hosts = "ask" (default "deny") holds a lookup of a name no
// allow entry matches for up to ask_timeout_seconds (30) while the daemon
// asks for an approval (docs/daemon.md); without a daemon such lookups are
// refused at once. Under a managed lock, lower layers may only lower the
// numbers and only move unknown_hosts from ask to deny.
//
// # Permission rules
//
// Rules are evaluated deny, then allow, then ask; the first match of the
// first kind that matches decides, else the default (ask). An agent's own
// rules replace global rules with the same tool and pattern and add to the
// rest. For shell tools (bash, sh, shell, exec, command) the input is split
// into simple commands — pipelines, &&, ||, ;, subshells, $(...), backticks,
// process substitution, function bodies, `sh -c`/`eval` strings and the
// command behind wrappers like sudo, env, timeout and xargs — each is
// judged, and the strictest verdict wins; input that does not parse is
// never allowed. Shell patterns use a matcher where `*` matches any text
// (doublestar's `*` stops at "/", which would let `rm *` miss
// `rm -rf /home`); other tools' inputs are paths matched with doublestar
// (`*` within a component, `**` across).
package policy

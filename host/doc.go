// Package host is the enforcement host: the one owner of the loaded BPF
// objects that enforce sessions — the BPF-LSM filesystem programs
// (package fsguard), the cgroup network programs (package egress) and the
// ring buffer every program reports refusals through (package
// audit/bpfring). It loads them once, applies them to each session the
// planner (package planner) gives them to, and pins them when asked to.
// The standalone CLI (`run`, `attach`) and the daemon open a Host the same
// way; they differ only in who keeps it alive: the CLI for the one session
// it supervises, the daemon for every session of its lifetime.
//
// A session run by RunNesting may have nested sessions: `run` inside it
// asks the supervisor on a socket of the session's (nest_linux.go), and
// the host applies its layers to the child's group with the child's
// rules (session.StartNested). docs/agents-tiers.md says how.
//
// # Where BPF objects live and how they are pinned
//
// Without Options.Pins the objects live in this process: when it exits or
// closes the host, the programs detach. With Pins, each layer pins its own
// objects as soon as it is built — every link by its program's name and
// every map by its name, the shared event maps included (the layers list
// them: session.FSLayer.Objects, session.NetworkLayer.Objects) — below
// DefaultPinDir, /sys/fs/bpf/oxsupervise (0700, root; bpffs is mounted
// there if it is not):
//
//	/sys/fs/bpf/oxsupervise/fs/gen-N/links/<program>   BPF-LSM hooks
//	/sys/fs/bpf/oxsupervise/fs/gen-N/maps/<map>        fs_sessions, fs_anchors, oxs_events, ...
//	/sys/fs/bpf/oxsupervise/net/gen-N/links/<program>  cgroup connect/sendmsg/...
//	/sys/fs/bpf/oxsupervise/net/gen-N/maps/<map>       net_sessions, net_allow, oxs_events, ...
//	/sys/fs/bpf/oxsupervise/run/<version>-ring<bytes>/events/maps/<map>          standalone (Cache)
//	/sys/fs/bpf/oxsupervise/run/<version>-ring<bytes>/net-<parent id>/{links,maps}/<name>
//	/sys/fs/bpf/oxsupervise/run/<version>-ring<bytes>/roview/{progs,maps}/<name>
//	/sys/fs/bpf/oxsupervise/probes/bpf-lsm-eperm-<conditions>  a refused probe (Cache)
//
// A pinned link stays attached with no process holding it, so sessions
// stay confined through a crash, kill -9 or upgrade of their owner.
// Generations (the daemon's Pinning) pins every start as a new generation
// N, numbered after any left: a generation is never reopened by another
// binary, so one with other programs or map layouts is never reused; the
// new owner applies the surviving sessions' rules again and then retires
// the older generations (see package daemon, retirePinned). Two
// generations attached at once only add refusals.
//
// Cache (the standalone CLI's Pinning) is the other way round: it exists
// to be reopened. The programs a `run` loaded stay pinned, attached and
// idle, when it exits, and the next standalone run or attach opens them
// from their pins (no load, no verifier) under an exclusive lease on the
// directory: the pinned programs report into one ring buffer, whose
// reader must supervise every session in their maps, so a second
// concurrent supervisor loads its own. The directory is named after a
// digest of the BPF objects the binary embeds (loader.ObjectsVersion), so
// a binary with other programs or map layouts never reuses them; it
// removes other versions' directories once they confine no live session.
// The daemon's generations and the standalone cache are separate: the
// daemon's pinned ring belongs to its reader (and, after a crash, to the
// next daemon's count of unaudited refusals), and while a daemon runs an
// unprivileged `run` goes through it anyway.
package host

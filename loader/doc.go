// Package loader loads oxsupervise's BPF objects into the kernel, attaches
// them, and probes which program types and hooks this kernel accepts.
//
// # Objects
//
// Each object is one C file under bpf/, compiled by bpf2go into
// <object>_bpfel.go and <object>_bpfel.o (committed; generate.go holds the
// //go:generate lines). Each file of bpf/ begins with an index of its
// hooks and what each decides.
//
// The BPF-LSM objects, loaded as one unit by LoadFS (fs_linux.go), all or
// nothing, every program attached; they share one session map
// (bpf/session.h), created with the first, and FSPrograms holds the maps
// package fsguard fills:
//
//   - fs (bpf/fs.c, fs.h): filesystem enforcement, the d_parent walk and
//     the file hooks.
//   - self (bpf/self.c): self-protection, the hooks on the kernel's own
//     interfaces (bpf, ptrace, signals, TIOCSTI, module and kernel loads,
//     mounts, clone3 into another cgroup).
//   - netfamily (bpf/netfamily.c): the network policy's BPF-LSM program,
//     which refuses the socket families the cgroup programs cannot see.
//   - unix (bpf/unix.c): abstract AF_UNIX sockets, which have no inode:
//     a session reaches only those created in it or in a session nested
//     below it.
//
// The others:
//
//   - net (bpf/net.c, net.h): the cgroup network programs.
//     LoadNetPrograms (net_linux.go) loads them; package egress attaches
//     them per session.
//   - anchor (bpf/anchor.c): a task_file iterator that tells package
//     fsguard the kernel's own (s_dev, i_ino) of open files
//     (anchor_linux.go).
//   - probe (bpf/probe.c): the smallest program of each type, which the
//     probes load and detach at once (probe_linux.go).
//
// events_linux.go holds the maps every object reports refusals through
// (bpf/events.h), created once and shared (EventMaps); pin_linux.go pins
// loaded objects below a bpffs directory. A test-only policy (mkdir deny,
// bpf/mkdirdeny.c) lives in internal/mkdirdeny, outside the API.
//
// # Names
//
// The identifier given to bpf2go is the object's name in lower case, so
// everything generated is unexported (fsObjects, loadNet, netNetSession),
// as in cilium/ebpf's examples. What other packages use is declared by
// hand: loaders and their handles (LoadFS, FSPrograms, LoadNetPrograms),
// and aliases for the C types userspace fills or decodes, the C prefix
// said once: struct fs_session is FSSession, struct net_session is
// NetSession, struct oxs_event_header (events.h) is EventHeader. Program
// names start with their object's name (fs_file_open, self_bpf,
// netfamily_socket_create, unix_stream_connect, net_connect4).
package loader

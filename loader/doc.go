// Package loader loads oxsupervise's BPF objects into the kernel, attaches
// them, and probes which program types and hooks this kernel accepts.
//
// # Objects
//
// Each object is one C file under bpf/, compiled by bpf2go into
// <object>_bpfel.go and <object>_bpfel.o (committed; generate.go holds the
// //go:generate lines), and loaded by the code in <object>_linux.go:
//
//   - fs (bpf/fs.c, fs.h): the BPF-LSM filesystem and self-protection
//     programs. LoadFS loads and attaches all of them; FSPrograms holds the
//     maps package fsguard fills.
//   - net (bpf/net.c, net.h): the cgroup network programs.
//     LoadNetPrograms loads them; package egress attaches them per session.
//   - anchor (bpf/anchor.c): a task_file iterator that tells package
//     fsguard the kernel's own (s_dev, i_ino) of open files.
//   - probe (bpf/probe.c): the smallest program of each type, which the
//     probes load and detach at once (probe_linux.go).
//
// events_linux.go holds the maps every object reports refusals through
// (bpf/events.h), created once and shared (EventMaps); pin_linux.go pins
// loaded objects below a bpffs directory. A test-only policy (mkdir deny)
// lives in internal/mkdirdeny, outside the API.
//
// # Names
//
// The identifier given to bpf2go is the object's name in lower case, so
// everything generated is unexported (fsObjects, loadNet, netNetSession),
// as in cilium/ebpf's examples. What other packages use is declared by
// hand: loaders and their handles (LoadFS, FSPrograms, LoadNetPrograms),
// and aliases for the C types userspace fills or decodes, the C prefix
// said once: struct fs_session is FSSession, struct net_session is
// NetSession, struct oxs_event_header (events.h) is EventHeader.
package loader

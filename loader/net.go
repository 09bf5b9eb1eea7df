package loader

// The cgroup network programs (bpf/net.c) use only UAPI types, so they need
// no CO-RE. bpf/netinc stands in for the multiarch asm/ headers, which
// keeps the build independent of the host architecture's include layout.
// Package egress owns their maps and attachment; this file only generates
// the loader (NetObjects, LoadNetObjects and the Net* map types).

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" -type net_event -type net_session -type net_allow_key -type net_allow_val -type net_port_range Net ../bpf/net.c -- -I../bpf -I../bpf/netinc

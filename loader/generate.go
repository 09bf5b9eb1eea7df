package loader

// The BPF objects are compiled with clang-19 for little-endian BPF only
// (amd64 and arm64 are both little-endian). The generated *_bpfel.go and
// *_bpfel.o files are committed; `make generate` reproduces them byte for
// byte and `make generate-check` fails when they are stale.
//
// One line per object. The identifier bpf2go is given is the base name of
// the C file in lower case, so the generated code is unexported (fsObjects,
// loadFs, netNetSession), as in cilium/ebpf's examples; what other packages
// use is written by hand in <object>_linux.go, with the C prefix of a type
// said once (fs_session -> FSSession, net_session -> NetSession).
//
// The common flags: -cc/-strip pin the toolchain so the output does not
// depend on which clang happens to be first in PATH; -tags linux keeps the
// generated loaders out of darwin/windows builds; -type names the C types
// userspace fills or decodes that no map declares.

// The probes (bpf/probe.c): the smallest program of each type doctor asks
// about.
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" probe ../bpf/probe.c -- -I../bpf

// The anchor resolver (bpf/anchor.c): a task_file iterator through which
// package fsguard learns the kernel's own (s_dev, i_ino) of each anchor.
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" -type anchor_record anchor ../bpf/anchor.c -- -I../bpf

// The filesystem programs (bpf/fs.c) and the types they share with package
// fsguard, and the event types every object shares (bpf/events.h).
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" -type fs_event -type fs_glob -type oxs_event_header -type oxs_flood_key -type oxs_flood_bucket fs ../bpf/fs.c -- -I../bpf

// The self-protection programs (bpf/self.c) and the network policy's
// socket-family program (bpf/netfamily.c): BPF-LSM objects loaded with the
// filesystem one, sharing its session map (bpf/session.h).
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" self ../bpf/self.c -- -I../bpf
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" netfamily ../bpf/netfamily.c -- -I../bpf

// Abstract AF_UNIX peers (bpf/unix.c), the one AF_UNIX judgement that no
// inode carries: a BPF-LSM object loaded with the filesystem one too.
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" unix ../bpf/unix.c -- -I../bpf

// The cgroup network programs (bpf/net.c) use only UAPI types, so they need
// no CO-RE. bpf/netinc stands in for the multiarch asm/ headers, which keeps
// the build independent of the host architecture's include layout.
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" -type net_event -type net_session -type net_allow_key -type net_allow_val -type net_port_range net ../bpf/net.c -- -I../bpf -I../bpf/netinc

// The read-only view's audit (bpf/roview.c): a raw tracepoint on every
// system call's exit that reports EROFS of session tasks.
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" -type roview_event -type roview_syscall roview ../bpf/roview.c -- -I../bpf

// The digest naming the BPF-LSM, network and read-only view objects
// (ObjectsVersion), computed here once rather than at every start; it
// follows the bpf2go lines above, which write the objects it digests, and
// is named *_bpfel.go like them, so generate-check compares it too.
//go:generate go run ./internal/objversion/gen objversion_bpfel.go fs self netfamily unix net roview

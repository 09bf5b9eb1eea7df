package loader

// The BPF objects are compiled with clang-19 for little-endian BPF only
// (amd64 and arm64 are both little-endian). The generated *_bpfel.go and
// *_bpfel.o files are committed; `make generate` reproduces them byte for
// byte and `make generate-check` fails when they are stale.
//
// The common flags: -cc/-strip pin the toolchain so the output does not
// depend on which clang happens to be first in PATH; -tags linux keeps the
// generated loaders out of darwin/windows builds.

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" probe ../bpf/probe.c -- -I../bpf
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" mkdirDeny ../bpf/mkdirdeny.c -- -I../bpf

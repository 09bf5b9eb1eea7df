// Package mkdirdeny is a test-only BPF-LSM policy (bpf/mkdirdeny.c): it
// refuses mkdir(2) for the cgroups it is given. Package loader's tests use
// it to prove the whole chain (compile, load, attach, per-cgroup lookup,
// errno to userspace) on a kernel apart from the real filesystem programs;
// being internal, it is no part of loader's API.
package mkdirdeny

// Flags as in loader/generate.go.
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" mkdirdeny ../../../bpf/mkdirdeny.c -- -I../../../bpf

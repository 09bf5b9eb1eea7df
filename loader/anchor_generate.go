package loader

// The anchor resolver (bpf/anchor.c): a task_file iterator through which
// package fsguard learns the kernel's own (s_dev, i_ino) of each anchor.

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" -type anchor_record anchor ../bpf/anchor.c -- -I../bpf

package loader

// The filesystem programs (bpf/fs.c) and the types they share with
// package fsguard; flags as in generate.go, plus -type for the event.

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -tags linux -cflags "-Wall -Werror" -type fs_event -type fs_glob -type oxs_event_header -type oxs_flood_key -type oxs_flood_bucket fs ../bpf/fs.c -- -I../bpf

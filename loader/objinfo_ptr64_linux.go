//go:build linux && (amd64 || arm64 || loong64 || mips64le || ppc64le || riscv64)

package loader

import "unsafe"

// pointer is a __aligned_u64 of the kernel's that holds an address: an
// unsafe.Pointer, so that the runtime keeps what it points to where it
// points (a moved stack is adjusted).
type pointer struct{ p unsafe.Pointer }

//go:build linux && (386 || arm || mipsle)

package loader

import "unsafe"

// pointer is a __aligned_u64 of the kernel's that holds an address: an
// unsafe.Pointer, so that the runtime keeps what it points to where it
// points (a moved stack is adjusted), padded to 64 bits after it (these
// machines are little-endian, as the objects the loader is built with
// are).
type pointer struct {
	p unsafe.Pointer
	_ uint32
}

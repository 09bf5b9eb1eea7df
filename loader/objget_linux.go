//go:build linux

package loader

// Opening a pinned program without cilium/ebpf's LoadPinnedProgram: after
// the open it runs its "object names" feature probe (once a process),
// which creates a map, and so first looks for a BPF token: it reads and
// parses /proc/self/mountinfo and asks each bpffs mount for one. On a
// standalone start that reuses every pin, that is the one object created
// (~0.4 ms of CPU, on the read-only view's reopen: issue 18), for a name
// a reopen never looks at.

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// objGetAttr is the bpf_attr of BPF_OBJ_GET.
type objGetAttr struct {
	pathname  pointer
	bpfFd     uint32
	fileFlags uint32
	pathFd    int32
}

// loadPinnedProgram opens the program pinned at path, as
// ebpf.LoadPinnedProgram does: a pin of anything else is refused.
func loadPinnedProgram(path string) (*ebpf.Program, error) {
	name, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, fmt.Errorf("pinned program %s: %w", path, err)
	}
	var attr objGetAttr // zeroed whole: the kernel refuses stray bytes
	attr.pathname.p = unsafe.Pointer(name)
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_OBJ_GET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(name)
	if errno != 0 {
		return nil, fmt.Errorf("pinned program %s: %w", path, errno)
	}
	// The kernel names the object's kind in its file's name.
	kind, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd)))
	if err != nil {
		unix.Close(int(fd))
		return nil, fmt.Errorf("pinned program %s: %w", path, err)
	}
	if kind != "anon_inode:bpf-prog" {
		unix.Close(int(fd))
		return nil, fmt.Errorf("%s is not a program (%s)", path, kind)
	}
	p, err := ebpf.NewProgramFromFD(int(fd))
	if err != nil {
		// NewProgramFromFD closes the descriptor it was given on error.
		return nil, fmt.Errorf("pinned program %s: %w", path, err)
	}
	return p, nil
}

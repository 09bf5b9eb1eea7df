//go:build linux

package loader

// The kernel ids a reopen checks its pins by, asked of the kernel in one
// bpf(BPF_OBJ_GET_INFO_BY_FD) each. cilium/ebpf's Map.Info and
// Program.Info also read /proc/self/fdinfo (and a program's BTF names):
// several times the cost, for fields a reopen does not look at, on every
// map and program of every standalone start (issue 18).

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// objInfoAttr is the bpf_attr of BPF_OBJ_GET_INFO_BY_FD.
type objInfoAttr struct {
	fd      uint32
	infoLen uint32
	info    pointer
}

// objInfo fills the first size bytes of the kernel's bpf_*_info of fd
// into info.
func objInfo(fd int, info unsafe.Pointer, size uintptr) error {
	var attr objInfoAttr // zeroed whole: the kernel refuses stray bytes
	attr.fd, attr.infoLen, attr.info.p = uint32(fd), uint32(size), info
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_OBJ_GET_INFO_BY_FD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(info)
	if errno != 0 {
		return errno
	}
	return nil
}

// mapID returns m's kernel id: the head of struct bpf_map_info.
func mapID(m *ebpf.Map) (ebpf.MapID, error) {
	info := new(struct{ typ, id uint32 })
	if err := objInfo(m.FD(), unsafe.Pointer(info), unsafe.Sizeof(*info)); err != nil {
		return 0, fmt.Errorf("map info: %w", err)
	}
	if info.id == 0 {
		return 0, fmt.Errorf("map info: the kernel reports no id")
	}
	return ebpf.MapID(info.id), nil
}

// progInfoHead is struct bpf_prog_info up to map_ids.
type progInfoHead struct {
	typ, id                     uint32
	tag                         [8]byte
	jitedProgLen, xlatedProgLen uint32
	jitedProgInsns, xlatedInsns uint64
	loadTime                    uint64
	createdByUID, nrMapIDs      uint32
	mapIDs                      pointer
}

// programInfo is what a reopen checks of a pinned program: its type (the
// kernel's enum bpf_prog_type), kernel id and the maps it uses.
type programInfo struct {
	Type uint32
	ID   ebpf.ProgramID
	Maps []ebpf.MapID
}

// maxProgramMaps bounds the map ids programInfo reads: more than any of
// these objects' programs use.
const maxProgramMaps = 64

// progInfo returns p's type, kernel id and the ids of the maps it uses.
func progInfo(p *ebpf.Program) (programInfo, error) {
	ids := make([]uint32, maxProgramMaps)
	info := new(progInfoHead)
	info.nrMapIDs, info.mapIDs.p = maxProgramMaps, unsafe.Pointer(&ids[0])
	err := objInfo(p.FD(), unsafe.Pointer(info), unsafe.Sizeof(*info))
	runtime.KeepAlive(ids)
	if err != nil {
		return programInfo{}, fmt.Errorf("program info: %w", err)
	}
	if info.id == 0 {
		return programInfo{}, fmt.Errorf("program info: the kernel reports no id")
	}
	if info.nrMapIDs > maxProgramMaps {
		return programInfo{}, fmt.Errorf("program info: the program uses %d maps, more than %d", info.nrMapIDs, maxProgramMaps)
	}
	out := programInfo{Type: info.typ, ID: ebpf.ProgramID(info.id)}
	for _, id := range ids[:info.nrMapIDs] {
		out.Maps = append(out.Maps, ebpf.MapID(id))
	}
	return out, nil
}

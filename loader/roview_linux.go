//go:build linux

package loader

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/openoxide/oxsupervise/loader/internal/memlock"
)

// The read-only view's audit object (bpf/roview.c): package session loads
// it for the sessions whose mount view is read-only outside their
// writable roots, fills its session map and decodes its events.
type (
	// ROViewObjects are the object's program and maps, loaded.
	ROViewObjects = roviewObjects
	// ROViewEvent is one EROFS refusal (struct roview_event).
	ROViewEvent = roviewRoviewEvent
	// ROViewSyscall says how a system call names its file (struct
	// roview_syscall); ROViewSyscalls fills the object's table with them.
	ROViewSyscall = roviewRoviewSyscall
)

// roview_event.flags (bpf/roview.c).
const (
	ROViewDirSet       = 1 << 0 // Dir holds the directory of Path (or the file of Fd)
	ROViewDirTruncated = 1 << 1 // Dir lost its leading components
	ROViewDirIsFile    = 1 << 2 // Dir names the file itself (fd, empty path)
	ROViewNoDir        = 1 << 3 // the dirfd named no open file
)

// LoadROView loads bpf/roview.c into objs, reporting through events, and
// fills its system call table for this architecture (ROViewTable). The
// program is not attached: AttachROView does that, only while a session
// needs it, since it runs on every system call of the machine.
func LoadROView(objs *ROViewObjects, events *EventMaps) error {
	memlock.Raise()
	spec, err := loadRoview()
	if err != nil {
		return fmt.Errorf("load read-only view audit spec: %w", err)
	}
	shared, err := events.share(spec)
	if err != nil {
		return fmt.Errorf("load read-only view audit: %w", err)
	}
	if err := spec.LoadAndAssign(objs, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		return fmt.Errorf("load read-only view audit: %w", memlock.WithoutHint(err))
	}
	if err := fillROViewSyscalls(objs); err != nil {
		objs.Close()
		return err
	}
	return nil
}

// fillROViewSyscalls writes this architecture's system call table
// (ROViewTable) into the object's.
func fillROViewSyscalls(objs *ROViewObjects) error {
	table := ROViewTable()
	keys := make([]uint32, 0, len(table))
	values := make([]ROViewSyscall, 0, len(table))
	for nr, sc := range table {
		keys = append(keys, uint32(nr))
		values = append(values, sc.Syscall)
	}
	// One system call for the whole table (array maps take batches since
	// Linux 5.6); one per entry where the batch is refused.
	if n, err := objs.RoviewSyscalls.BatchUpdate(keys, values, nil); err == nil && n == len(keys) {
		return nil
	}
	for nr, sc := range table {
		if err := objs.RoviewSyscalls.Update(uint32(nr), sc.Syscall, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("read-only view audit: system call %d (%s): %w", nr, sc.Op, err)
		}
	}
	return nil
}

// AttachROView attaches the program to the raw tracepoint sys_exit.
func AttachROView(objs *ROViewObjects) (link.Link, error) {
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_exit", Program: objs.RoviewSysExit})
	if err != nil {
		return nil, fmt.Errorf("attach the read-only view audit to raw tracepoint sys_exit: %w", err)
	}
	return l, nil
}

// DecodeROView decodes one raw record of SourceROView.
func DecodeROView(raw []byte) (*ROViewEvent, error) {
	var e ROViewEvent
	if len(raw) < binary.Size(e) {
		return nil, fmt.Errorf("read-only view event of %d bytes, want %d", len(raw), binary.Size(e))
	}
	if _, err := binary.Decode(raw, binary.NativeEndian, &e); err != nil {
		return nil, fmt.Errorf("decode read-only view event: %w", err)
	}
	return &e, nil
}

// ROViewPaths are the files an event names, absolute where the kernel
// could say which directory a relative path is relative to.
type ROViewPaths struct {
	// Path is the file changed or created; Path2 the other name of a
	// rename or link, or a symlink's target.
	Path, Path2 string
	// Relative is set when Path could not be made absolute (the dirfd
	// named no open file); Truncated when its directory lost leading
	// components (deeper than the event holds).
	Relative, Truncated bool
}

// Paths returns the files e names.
func (e *ROViewEvent) Paths() ROViewPaths {
	p := ROViewPaths{Path: cString(e.Path[:]), Path2: cString(e.Path2[:])}
	p.Truncated = e.Flags&ROViewDirTruncated != 0
	if e.Flags&ROViewDirSet == 0 {
		p.Relative = p.Path != "" && !strings.HasPrefix(p.Path, "/") || e.Flags&ROViewNoDir != 0
		return p
	}
	// The names are leaf first, each followed by '/'.
	names := strings.Split(strings.TrimSuffix(cString(e.Dir[:min(int(e.DirOff), len(e.Dir))]), "/"), "/")
	slices.Reverse(names)
	dir := "/" + strings.Join(names, "/")
	if e.DirOff == 0 {
		dir = "/"
	}
	if e.Flags&ROViewDirIsFile != 0 || p.Path == "" {
		p.Path = dir
	} else {
		p.Path = filepath.Join(dir, p.Path)
	}
	if p.Path2 != "" && !strings.HasPrefix(p.Path2, "/") && e.Dirfd2 == e.Dirfd && ROViewOp(e.Op) != ROViewOpSymlink {
		p.Path2 = filepath.Join(dir, p.Path2)
	}
	return p
}

// CommandLine is the caller's command line, its arguments space-separated.
func (e *ROViewEvent) CommandLine() string {
	b := make([]byte, 0, e.ArgsLen)
	for _, c := range e.Args[:min(int(e.ArgsLen), len(e.Args))] {
		b = append(b, byte(c))
	}
	return strings.TrimSpace(strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
}

// Comm is the caller's task name.
func (e *ROViewEvent) CommName() string { return cString(e.Comm[:]) }

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

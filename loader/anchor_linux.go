//go:build linux

package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/openoxide/oxsupervise/loader/internal/memlock"
)

// AnchorID is an inode as the kernel names it in the BPF-LSM walk.
type AnchorID struct {
	Dev uint32 // s_dev: major << 20 | minor
	Ino uint64
}

// AnchorResolver reads the kernel's (s_dev, i_ino) of open files of this
// process (bpf/anchor.c).
type AnchorResolver struct {
	objs anchorObjects
	link link.Link
}

// LoadAnchorResolver loads the iterator for the calling process. The
// process id is fixed at load time: a process that forks must load its
// own.
func LoadAnchorResolver() (*AnchorResolver, error) {
	memlock.Raise()
	spec, err := loadAnchor()
	if err != nil {
		return nil, fmt.Errorf("load anchor resolver spec: %w", err)
	}
	tgid, ok := spec.Variables["anchor_tgid"]
	if !ok {
		return nil, errors.New("load anchor resolver: variable anchor_tgid missing from the object")
	}
	if err := tgid.Set(uint32(os.Getpid())); err != nil {
		return nil, fmt.Errorf("load anchor resolver: set anchor_tgid: %w", err)
	}
	r := &AnchorResolver{}
	if err := memlock.WithoutHint(spec.LoadAndAssign(&r.objs, nil)); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("load anchor resolver: %w\n%+v", err, verr)
		}
		return nil, fmt.Errorf("load anchor resolver: %w", err)
	}
	l, err := link.AttachIter(link.IterOptions{Program: r.objs.AnchorFiles})
	if err != nil {
		r.objs.Close()
		return nil, fmt.Errorf("attach anchor resolver task_file iterator: %w", err)
	}
	r.link = l
	return r, nil
}

// Resolve returns the kernel's identity of the inode behind each of fds,
// which must be open in this process. An fd the iterator did not report
// (closed meanwhile, or without an inode) is an error.
func (r *AnchorResolver) Resolve(fds []int) (map[int]AnchorID, error) {
	it, ok := r.link.(*link.Iter)
	if !ok {
		return nil, fmt.Errorf("resolve anchors: link is %T, not an iterator", r.link)
	}
	rd, err := it.Open()
	if err != nil {
		return nil, fmt.Errorf("resolve anchors: open iterator: %w", err)
	}
	defer rd.Close()
	raw, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("resolve anchors: read iterator: %w", err)
	}
	want := make(map[int]bool, len(fds))
	for _, fd := range fds {
		want[fd] = true
	}
	out := make(map[int]AnchorID, len(fds))
	var rec anchorAnchorRecord
	size := binary.Size(rec)
	for len(raw) >= size {
		if err := binary.Read(bytes.NewReader(raw[:size]), binary.NativeEndian, &rec); err != nil {
			return nil, fmt.Errorf("resolve anchors: decode record: %w", err)
		}
		raw = raw[size:]
		if want[int(rec.Fd)] {
			out[int(rec.Fd)] = AnchorID{Dev: rec.Dev, Ino: rec.Ino}
		}
	}
	if len(raw) != 0 {
		return nil, fmt.Errorf("resolve anchors: %d trailing bytes from the iterator", len(raw))
	}
	for _, fd := range fds {
		if _, ok := out[fd]; !ok {
			return nil, fmt.Errorf("resolve anchors: the kernel reported no inode for fd %d", fd)
		}
	}
	return out, nil
}

// Close unloads the iterator.
func (r *AnchorResolver) Close() error {
	return errors.Join(r.link.Close(), r.objs.Close())
}

//go:build linux

package quarantine

// The fanotify events a Watch reads: one read's buffer of events, each
// event's DFID_NAME record (a directory's handle and the name created in
// it), and the handle turned back into a path. What an event means for
// the session is watch_linux.go's (created).

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// drain reads and handles every event queued (w.handling held).
func (w *Watch) drain(buf []byte) {
	for {
		n, err := unix.Read(w.fan, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		w.handleBuffer(buf[:n])
	}
}

// handleBuffer parses the events in one read (fanotify(7)).
func (w *Watch) handleBuffer(b []byte) {
	for len(b) >= unix.FAN_EVENT_METADATA_LEN {
		evLen := int(binary.NativeEndian.Uint32(b[0:4]))
		if evLen < unix.FAN_EVENT_METADATA_LEN || evLen > len(b) {
			return
		}
		metaLen := int(binary.NativeEndian.Uint16(b[6:8]))
		mask := binary.NativeEndian.Uint64(b[8:16])
		fd := int32(binary.NativeEndian.Uint32(b[16:20]))
		pid := int(int32(binary.NativeEndian.Uint32(b[20:24])))
		if fd >= 0 {
			unix.Close(int(fd)) // not with FAN_REPORT_DFID_NAME; never leak one
		}
		if mask&unix.FAN_Q_OVERFLOW != 0 {
			fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: fanotify queue overflow: the writable roots are walked for protected names when the session ends\n")
			w.setWalkAll()
		} else if metaLen <= evLen {
			w.handleInfo(b[metaLen:evLen], mask, pid)
		}
		b = b[evLen:]
	}
}

// handleInfo handles one event's DFID_NAME record: a directory handle and
// the name created in it.
func (w *Watch) handleInfo(info []byte, mask uint64, pid int) {
	for len(info) >= 4 {
		typ, l := info[0], int(binary.NativeEndian.Uint16(info[2:4]))
		if l < 4 || l > len(info) {
			return
		}
		rec := info[:l]
		info = info[l:]
		if typ != unix.FAN_EVENT_INFO_TYPE_DFID_NAME || len(rec) < 4+8+8 {
			continue
		}
		var fsid [2]int32
		fsid[0] = int32(binary.NativeEndian.Uint32(rec[4:8]))
		fsid[1] = int32(binary.NativeEndian.Uint32(rec[8:12]))
		hbytes := int(binary.NativeEndian.Uint32(rec[12:16]))
		htype := int32(binary.NativeEndian.Uint32(rec[16:20]))
		if 20+hbytes > len(rec) {
			continue
		}
		handle := rec[20 : 20+hbytes]
		name := string(rec[20+hbytes:])
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		movedDir := mask&unix.FAN_MOVED_TO != 0 && mask&unix.FAN_ONDIR != 0
		if !w.names[name] && !movedDir {
			continue
		}
		if pid == os.Getpid() {
			continue // this supervisor's own moves
		}
		if in, known := w.opts.InSession(pid); known && !in {
			continue
		}
		dir, ok := w.resolve(fsid, htype, handle)
		if !ok {
			continue
		}
		w.created(filepath.Join(dir, name), pid, movedDir)
	}
}

// resolve turns a directory handle into its path in this (the host's)
// mount namespace.
func (w *Watch) resolve(fsid [2]int32, htype int32, handle []byte) (string, bool) {
	mfd, ok := w.byFSID[fsid]
	if !ok {
		return "", false
	}
	fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(htype, handle), unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return "", false // removed since
	}
	defer unix.Close(fd)
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil || strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return p, true
}

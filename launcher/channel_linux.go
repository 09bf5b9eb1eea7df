//go:build linux

package launcher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// The spec channel (SpecFD) is the launcher's end of a SOCK_STREAM Unix
// socket pair; the supervisor keeps the other. It carries, once, a frame
// of the Spec: its length (4 bytes, big endian) and its JSON, and on the
// frame's first byte SCM_RIGHTS with the session's descriptors, in this
// order: stdin, stdout, stderr, then the private /dev/shm's tmpfs when
// Spec.Mounts.PrivateShm. Nothing the launcher is given at fork depends on
// the session it will be, so a launcher can be started before its session
// is asked for (a daemon's slot) or alongside its set-up (every other
// start): one protocol for both. With Spec.ExecGate the same socket is the
// exec gate afterwards (GateMountsDone, GateGo).

// maxSpecBytes bounds the frame a launcher reads: a length beyond it is
// not a spec of this protocol.
const maxSpecBytes = 64 << 20

// specDescriptors is the number of descriptors that come with spec.
func specDescriptors(spec *Spec) int {
	if spec.Mounts.PrivateShm {
		return 4
	}
	return 3
}

// Descriptors are the session's descriptors that travel with its Spec.
type Descriptors struct {
	Stdin, Stdout, Stderr *os.File
	// Shm is the private /dev/shm's tmpfs (NewPrivateShm), given exactly
	// when Spec.Mounts.PrivateShm.
	Shm *os.File
}

// SendSpec sends spec, stamped with this build's SpecVersion, and d on
// conn, the supervisor's end of the launcher's spec channel.
func SendSpec(conn *os.File, spec Spec, d Descriptors) error {
	files := []*os.File{d.Stdin, d.Stdout, d.Stderr}
	if spec.Mounts.PrivateShm {
		files = append(files, d.Shm)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		if f == nil {
			return fmt.Errorf("send launch spec: descriptor %d of %d missing", i, len(files))
		}
		fds[i] = int(f.Fd())
	}
	body := EncodeSpec(spec)
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	frame = append(frame, body...)
	fd := int(conn.Fd())
	n, err := unix.SendmsgN(fd, frame, unix.UnixRights(fds...), nil, 0)
	for err == nil && n < len(frame) {
		var m int
		m, err = unix.Write(fd, frame[n:])
		n += m
	}
	runtime.KeepAlive(files)
	if err != nil {
		return fmt.Errorf("send launch spec: %w", err)
	}
	return nil
}

// receiveSpec reads the spec frame from fd (readSpecFrame) and installs
// the descriptors that came with it: stdin, stdout and stderr on 0, 1 and
// 2, the private /dev/shm's as Spec.Mounts.ShmFD.
func receiveSpec(fd int) (Spec, error) {
	spec, got, err := readSpecFrame(fd)
	if err != nil {
		return Spec{}, err
	}
	for i := 0; i < 3; i++ {
		// dup3 leaves the copy without close-on-exec: the command's
		// standard streams.
		if err := unix.Dup3(got[i], i, 0); err != nil {
			closeFDs(got)
			return Spec{}, fmt.Errorf("install the session's descriptor %d: %w", i, err)
		}
	}
	closeFDs(got[:3])
	if spec.Mounts.PrivateShm {
		// Close-on-exec (MSG_CMSG_CLOEXEC): the launcher's own.
		spec.Mounts.ShmFD = got[3]
	}
	return spec, nil
}

func closeFDs(fds []int) {
	for _, f := range fds {
		unix.Close(f)
	}
}

// readSpecFrame reads the spec frame from fd and returns the spec and the
// descriptors that came with it, close-on-exec. A frame that does not
// decode, or came with other descriptors than the spec asks for, is
// refused, its descriptors closed.
func readSpecFrame(fd int) (Spec, []int, error) {
	var got []int
	oob := make([]byte, unix.CmsgSpace(8*4))
	readFull := func(p []byte) error {
		for off := 0; off < len(p); {
			n, oobn, _, _, err := unix.Recvmsg(fd, p[off:], oob, unix.MSG_CMSG_CLOEXEC)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if oobn > 0 {
				msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
				if err != nil {
					return err
				}
				for _, m := range msgs {
					fds, err := unix.ParseUnixRights(&m)
					if err != nil {
						return err
					}
					got = append(got, fds...)
				}
			}
			if n == 0 {
				return errors.New("the supervisor closed the spec channel before the spec was complete")
			}
			off += n
		}
		return nil
	}
	fail := func(err error) (Spec, []int, error) {
		closeFDs(got)
		return Spec{}, nil, err
	}
	var head [4]byte
	if err := readFull(head[:]); err != nil {
		return fail(fmt.Errorf("read launch spec: %w", err))
	}
	size := binary.BigEndian.Uint32(head[:])
	if size > maxSpecBytes {
		return fail(fmt.Errorf("read launch spec: %d bytes announced, more than %d (is the launcher from the same build as oxsupervise?)", size, maxSpecBytes))
	}
	body := make([]byte, size)
	if err := readFull(body); err != nil {
		return fail(fmt.Errorf("read launch spec: %w", err))
	}
	spec, err := readSpec(body)
	if err != nil {
		return fail(err)
	}
	if want := specDescriptors(&spec); len(got) != want {
		what := "stdin, stdout, stderr"
		if spec.Mounts.PrivateShm {
			what += ", private /dev/shm"
		}
		return fail(fmt.Errorf("launch spec came with %d descriptors, want %d (%s)", len(got), want, what))
	}
	return spec, got, nil
}

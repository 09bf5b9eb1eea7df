//go:build linux

package host

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/openoxide/oxsupervise/internal/ahead"
)

// nestSocket is the socket a session's nested runs ask its supervisor on.
type nestSocket struct {
	path string
	ln   *net.UnixListener
}

// listenNestSocket listens on a new socket in dir ("" means
// DefaultNestDir), named after this process (removeStaleSockets).
func listenNestSocket(dir string) (*nestSocket, error) {
	if dir == "" {
		dir = DefaultNestDir
	}
	// 0711: the sockets' names are not listed, only reached.
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	removeStaleSockets(dir)
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	// Named after the supervisor's pid, for removeStaleSockets.
	path := filepath.Join(dir, fmt.Sprintf("%d-%s.sock", os.Getpid(), hex.EncodeToString(b[:])))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	// Any uid may connect (a session may run as another user than root);
	// what the caller may ask is decided by its cgroup.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return &nestSocket{path: path, ln: ln}, nil
}

// removeStaleSockets removes the sockets of supervisors that are gone
// (killed: a supervisor that ends removes its own).
func removeStaleSockets(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, _, ok := strings.Cut(e.Name(), "-")
		if !ok || !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// NestListener is the nested-session socket of a session not built yet,
// listened on while its supervisor does the rest of the start: a
// standalone run's start is mostly serial (the host's BPF objects, then
// the plan they allow), and the socket's making (a directory scan, an
// inode for the socket: ~0.5 ms) needs none of it. Nothing is served on
// it before RunNesting's session starts, as when RunNesting listens.
type NestListener struct {
	sock *ahead.Value[*nestSocket]
}

// ListenNestAhead starts listening on the socket RunNesting would make in
// dir ("" means DefaultNestDir); pass it as NestOptions.Ahead, and Close
// it once RunNesting returned (or when it is not called).
func ListenNestAhead(dir string) *NestListener {
	return &NestListener{ahead.Start(func() (*nestSocket, error) { return listenNestSocket(dir) },
		func(s *nestSocket) { s.ln.Close() })}
}

// take waits for the socket and hands it to the caller, once.
func (l *NestListener) take() (*nestSocket, error) {
	sock, err, ok := l.sock.Take()
	if !ok {
		return nil, errors.New("the socket listened on ahead was already used or closed")
	}
	return sock, err
}

// Close closes the socket unless RunNesting took it (RunNesting closes it
// when its session ends).
func (l *NestListener) Close() { l.sock.Close() }

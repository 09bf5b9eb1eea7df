//go:build linux

package daemon

import (
	"net/http"
	"os"

	"golang.org/x/sys/unix"
)

// stdio are a caller's standard streams (stdin, stdout, stderr), passed as
// SCM_RIGHTS on the bytes of a run or exec request (conn_linux.go collects
// them).
type stdio [3]*os.File

func (f stdio) close() {
	for _, file := range f {
		file.Close()
	}
}

// decodeWithStdio decodes r's body into req and takes the three
// descriptors the request must carry; the caller closes them.
func decodeWithStdio(r *http.Request, req request) (stdio, error) {
	if err := DecodeRequest(r.Body, req); err != nil {
		return stdio{}, err
	}
	return takeStdio(r, r.Method+" "+r.URL.Path)
}

// takeStdio takes exactly the three descriptors a run or exec request must
// carry; what names the request in a refusal.
func takeStdio(r *http.Request, what string) (stdio, error) {
	var files stdio
	c := connOf(r.Context())
	if c == nil {
		return files, errorf(http.StatusBadRequest, "bad_request", "%s needs a Unix socket connection", what)
	}
	fds := c.takeFDs()
	if len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return files, errorf(http.StatusBadRequest, "bad_request", "%s needs exactly 3 file descriptors (stdin, stdout, stderr) sent as SCM_RIGHTS with the request; got %d", what, len(fds))
	}
	for i, name := range []string{"stdin", "stdout", "stderr"} {
		files[i] = os.NewFile(uintptr(fds[i]), name)
	}
	return files, nil
}

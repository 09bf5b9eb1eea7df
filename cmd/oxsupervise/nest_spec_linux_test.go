//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/session"
)

// A nested run whose supervisor's first answer holds no launch spec it
// can read (damaged, of another build, or the JSON spec of a build before
// the wire encoding) kills its launcher, which ran nothing, and says why.
func TestNestedRunRefusesAnUnreadableSpec(t *testing.T) {
	var otherBuild []byte
	{
		// A spec of a later build: this build's encoding, another version.
		spec := launcher.EncodeSpec(launcher.Spec{Path: "/bin/true"})
		if spec[0] != 1 || spec[1] != byte(launcher.SpecVersion*2) {
			t.Fatalf("the encoding no longer starts with the version field: % x", spec[:2])
		}
		otherBuild = append([]byte{1, byte((launcher.SpecVersion + 1) * 2)}, spec[2:]...)
	}
	answer := func(a any) string {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"damaged spec", answer(host.NestAnswer{Session: "s", Spec: []byte{0xff, 0x01}}), "the supervisor's launch spec: decode launch spec"},
		{"spec of another build", answer(host.NestAnswer{Session: "s", Spec: otherBuild}), "different builds"},
		{"JSON spec of an earlier build", `{"session":"s","spec":{"path":"/bin/true","exec_gate":true}}`, "the answer has no launch spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := session.StartNestedLauncher(os.Stdin, os.Stdout, os.Stderr)
			if err != nil {
				t.Fatalf("start a nested launcher: %v", err)
			}
			pid := l.Pid()
			client, supervisor := net.Pipe()
			defer supervisor.Close()
			requests := make(chan host.NestRequest, 1)
			go func() {
				var req host.NestRequest
				if err := json.NewDecoder(bufio.NewReader(supervisor)).Decode(&req); err != nil {
					close(requests)
					return
				}
				requests <- req
				supervisor.Write([]byte(tc.answer + "\n"))
			}()
			var errb bytes.Buffer
			code := askNested(context.Background(), streams{err: &errb}, client, l, host.NestRequest{Argv: []string{"true"}, Dir: "/"}, nil)
			if code != exitNoBoundary {
				t.Errorf("exit %d, want %d (nothing ran)\nstderr %s", code, exitNoBoundary, errb.String())
			}
			if got := errb.String(); !strings.Contains(got, tc.want) || !strings.Contains(got, "nothing ran") {
				t.Errorf("stderr %q, want it to say %q and that nothing ran", got, tc.want)
			}
			if req, ok := <-requests; !ok || req.Launcher != pid || !req.ExecGate {
				t.Errorf("request %+v (read: %v), want it to name launcher %d held at its exec gate", req, ok, pid)
			}
			// askNested waited for the launcher it killed: its pid is gone.
			if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
				t.Errorf("launcher %d still there after the refusal (kill 0: %v)", pid, err)
			}
		})
	}
}

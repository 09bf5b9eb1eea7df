package doctor

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/openoxide/oxsupervise/agent"
	"github.com/openoxide/oxsupervise/loader"
)

// Run probes this machine and returns the report with its verdict. It
// changes nothing lasting: the probe cgroup and probe programs are removed
// before it returns, and the audit configuration is only read. The one
// exception is mounting securityfs on /sys/kernel/security when it is not
// mounted, which is how the LSM list becomes readable.
func Run(ctx context.Context) Report {
	r := Report{SchemaVersion: SchemaVersion, OS: runtime.GOOS}
	probeHost(ctx, &r)
	r.decide()
	m := ReadMachine("/")
	r.Machine, r.Remedies = &m, Remedies(m, &r) // remedy.go
	r.Agents = agent.Find(os.Getenv("PATH"))
	return r
}

// probeFrom turns a probe's error into a Probe.
func probeFrom(err error) Probe {
	if err == nil {
		return Probe{OK: true}
	}
	p := Probe{Error: err.Error(), Step: stepOf(err)}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		p.Errno = errnoName(errno)
	}
	return p
}

// stepOf picks the failing step out of a loader error: its messages read
// "<probe> probe: <step>: <cause>".
func stepOf(err error) string {
	if errors.Is(err, loader.ErrBPFNotInLSMList) {
		return "lsm list"
	}
	msg := err.Error()
	_, rest, ok := strings.Cut(msg, " probe: ")
	if !ok {
		return ""
	}
	step, _, _ := strings.Cut(rest, ": ")
	return step
}

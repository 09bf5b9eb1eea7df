//go:build linux

package launcher

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestBPFAsm(t *testing.T) {
	a := newBPFAsm()
	a.ld(0)
	a.jeq(7, "yes", "")
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label("yes")
	a.ret(unix.SECCOMP_RET_ERRNO | 1)
	prog, err := a.assemble()
	if err != nil {
		t.Fatal(err)
	}
	if j := prog[1]; j.Jt != 1 || j.Jf != 0 {
		t.Errorf("jeq offsets %d/%d, want 1/0", j.Jt, j.Jf)
	}
	for _, tc := range []struct {
		build func(a *bpfAsm)
		want  string
	}{
		{func(a *bpfAsm) { a.jeq(1, "nowhere", "") }, "undefined label"},
		{func(a *bpfAsm) { a.label("back"); a.ld(0); a.jeq(1, "back", "") }, "out of reach"},
	} {
		a := newBPFAsm()
		tc.build(a)
		a.ret(0)
		if _, err := a.assemble(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("assemble: %v, want %q", err, tc.want)
		}
	}
	// The session filter assembles for this architecture, with and
	// without the socket rules.
	tables, err := filteredSyscalls()
	if err != nil {
		t.Fatal(err)
	}
	for _, restrict := range []bool{false, true} {
		if _, err := sessionFilter(tables, restrict); err != nil {
			t.Errorf("sessionFilter(restrictSockets=%v): %v", restrict, err)
		}
	}
	if _, err := clone3Filter(tables); err != nil {
		t.Errorf("clone3Filter: %v", err)
	}
	// Every ABI the filter knows refuses clone3: one it did not would
	// let a 32-bit (or x32) program start a child in another cgroup.
	for _, tab := range tables {
		if len(tab.clone3) == 0 {
			t.Errorf("no clone3 number for audit arch %#x", tab.arch)
		}
	}
}

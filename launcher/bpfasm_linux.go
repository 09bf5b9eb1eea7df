//go:build linux

package launcher

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bpfAsm assembles a classic BPF program with symbolic jump targets, so
// that a seccomp filter reads as a list of checks rather than of offsets.
type bpfAsm struct {
	prog   []unix.SockFilter
	labels map[string]int
	// jumps are the symbolic targets of conditional jumps: index of the
	// instruction, then its true and false targets ("" = next).
	jumps []bpfJump
}

type bpfJump struct {
	at     int
	jt, jf string
}

func newBPFAsm() *bpfAsm { return &bpfAsm{labels: map[string]int{}} }

func (a *bpfAsm) ld(off uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

func (a *bpfAsm) and(k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: k})
}

func (a *bpfAsm) ret(k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

// jeq jumps to jt when the accumulator equals k, to jf otherwise.
func (a *bpfAsm) jeq(k uint32, jt, jf string) {
	a.jumps = append(a.jumps, bpfJump{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k})
}

// label names the next instruction.
func (a *bpfAsm) label(name string) { a.labels[name] = len(a.prog) }

// assemble resolves the jumps: every target must be a defined label after
// the jump and within classic BPF's 255-instruction reach.
func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	offset := func(at int, target string) (uint8, error) {
		if target == "" {
			return 0, nil
		}
		to, ok := a.labels[target]
		if !ok {
			return 0, fmt.Errorf("bpf: undefined label %q", target)
		}
		d := to - at - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("bpf: jump from %d to %q (%d) out of reach", at, target, to)
		}
		return uint8(d), nil
	}
	for _, j := range a.jumps {
		var err error
		if a.prog[j.at].Jt, err = offset(j.at, j.jt); err != nil {
			return nil, err
		}
		if a.prog[j.at].Jf, err = offset(j.at, j.jf); err != nil {
			return nil, err
		}
	}
	if len(a.prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("bpf: %d instructions, more than %d", len(a.prog), unix.BPF_MAXINSNS)
	}
	return a.prog, nil
}

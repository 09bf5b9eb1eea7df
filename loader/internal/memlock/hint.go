package memlock

import "strings"

// hint is what cilium/ebpf appends to the message of every EPERM from
// bpf(2). Raise has already lifted the limit as far as this process may,
// so on kernels since 5.11 (which charge the memory cgroup, not the
// rlimit) the hint sends users the wrong way, and it names a function of
// a library they do not call.
const hint = " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)"

// WithoutHint returns err with cilium/ebpf's RLIMIT_MEMLOCK hint taken
// out of its message; errors.Is and errors.As still see every error it
// wraps.
func WithoutHint(err error) error {
	if err == nil || !strings.Contains(err.Error(), hint) {
		return err
	}
	return &withoutHint{msg: strings.Replace(err.Error(), hint, "", 1), err: err}
}

type withoutHint struct {
	msg string
	err error
}

func (e *withoutHint) Error() string { return e.msg }

func (e *withoutHint) Unwrap() error { return e.err }

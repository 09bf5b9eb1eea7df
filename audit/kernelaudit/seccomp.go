package kernelaudit

import (
	"fmt"
	"strconv"

	"github.com/openoxide/oxsupervise/audit"
)

// seccompRetErrno is SECCOMP_RET_ERRNO; the low 16 bits of code are the
// errno returned.
const (
	// unsetAuditSession is the ses of a task that never logged in.
	unsetAuditSession = 4294967295

	seccompRetErrno  = 0x00050000
	seccompRetAction = 0xffff0000
	seccompRetData   = 0x0000ffff
)

// isSeccompRefusal reports whether an AUDIT_SECCOMP record is a refusal
// (SECCOMP_RET_ERRNO): SECCOMP_RET_LOG records allowed calls.
func isSeccompRefusal(f Fields) bool {
	code, err := strconv.ParseUint(valueOf(f, "code"), 0, 32)
	return err == nil && code&seccompRetAction == seccompRetErrno
}

// seccompSyscall names the syscalls the session's seccomp filter refuses,
// by audit arch (hex, as the record writes it) and number, with the class
// of what the refusal protects. A number missing here is reported by
// number. clone3's refusal is not audited (launcher/seccomp_linux.go says
// why); it is named so that a record of it, which a test asserts there is
// none of, would say what it is.
var seccompSyscall = map[string]map[int]struct {
	name  string
	class audit.Class
}{
	"c000003e": { // x86-64 (x32 numbers carry bit 30)
		16: {"ioctl", audit.ClassSelfProtection}, 0x40000000 | 514: {"ioctl", audit.ClassSelfProtection},
		41: {"socket", audit.ClassNetwork}, 0x40000000 | 41: {"socket", audit.ClassNetwork},
		53: {"socketpair", audit.ClassNetwork}, 0x40000000 | 53: {"socketpair", audit.ClassNetwork},
		425: {"io_uring_setup", audit.ClassSelfProtection}, 426: {"io_uring_enter", audit.ClassSelfProtection}, 427: {"io_uring_register", audit.ClassSelfProtection},
		0x40000000 | 425: {"io_uring_setup", audit.ClassSelfProtection},
		435:              {"clone3", audit.ClassSelfProtection}, 0x40000000 | 435: {"clone3", audit.ClassSelfProtection},
	},
	"40000003": { // i386
		54: {"ioctl", audit.ClassSelfProtection}, 102: {"socketcall", audit.ClassNetwork},
		359: {"socket", audit.ClassNetwork}, 360: {"socketpair", audit.ClassNetwork},
		425: {"io_uring_setup", audit.ClassSelfProtection}, 426: {"io_uring_enter", audit.ClassSelfProtection}, 427: {"io_uring_register", audit.ClassSelfProtection},
		435: {"clone3", audit.ClassSelfProtection},
	},
	"c00000b7": { // aarch64
		29: {"ioctl", audit.ClassSelfProtection}, 198: {"socket", audit.ClassNetwork}, 199: {"socketpair", audit.ClassNetwork},
		425: {"io_uring_setup", audit.ClassSelfProtection}, 426: {"io_uring_enter", audit.ClassSelfProtection}, 427: {"io_uring_register", audit.ClassSelfProtection},
		435: {"clone3", audit.ClassSelfProtection},
	},
	"c00000f3": { // riscv64
		29: {"ioctl", audit.ClassSelfProtection}, 198: {"socket", audit.ClassNetwork}, 199: {"socketpair", audit.ClassNetwork},
		425: {"io_uring_setup", audit.ClassSelfProtection}, 426: {"io_uring_enter", audit.ClassSelfProtection}, 427: {"io_uring_register", audit.ClassSelfProtection},
		435: {"clone3", audit.ClassSelfProtection},
	},
}

// seccompRecords turns an AUDIT_SECCOMP refusal into one audit record of
// layer seccomp. The kernel's record has no arguments: which family or
// ioctl request was refused is not known, the syscall and errno are.
func seccompRecords(ev Event, sessionOf sessionFunc, sessionOfSes func(uint32) (string, bool), keepAll bool) ([]audit.Record, int) {
	f := ev.Seccomp
	code, _ := strconv.ParseUint(valueOf(f, "code"), 0, 32)
	arch := valueOf(f, "arch")
	nr := f.Int("syscall")
	op, class := fmt.Sprintf("syscall %d", nr), audit.ClassSelfProtection
	if s, ok := seccompSyscall[arch][nr]; ok {
		op, class = s.name, s.class
	}
	pid := f.Int("pid")
	r := audit.Record{
		Timestamp: ev.Time,
		Event:     audit.Event{Action: op},
		Process:   &audit.Process{PID: pid, Name: unknownEmpty(valueOf(f, "comm")), Executable: unknownEmpty(valueOf(f, "exe"))},
		Ox: audit.Ox{Kind: audit.KindDenial, Layer: audit.LayerSeccomp, Class: class,
			Errno: int(code & seccompRetData), Rule: fmt.Sprintf("seccomp: %s refused (arch %s, syscall %d)", op, arch, nr)},
	}
	if uid, ok := f.Get("uid"); ok {
		r.User = &audit.User{ID: uid}
	}
	if s, ok := sessionOf(pid); ok && pid > 0 {
		r.Ox.Session = s
		return []audit.Record{r}, 0
	}
	// The process may be gone (cgroup attribution needs it alive); its
	// audit session id is still in the record.
	if ses, err := strconv.ParseUint(valueOf(f, "ses"), 10, 32); err == nil && ses != unsetAuditSession && sessionOfSes != nil {
		if s, ok := sessionOfSes(uint32(ses)); ok {
			r.Ox.Session = s
			return []audit.Record{r}, 0
		}
	}
	if keepAll {
		return []audit.Record{r}, 1
	}
	return nil, 1
}

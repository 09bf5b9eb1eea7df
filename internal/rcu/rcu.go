// Package rcu reads how the kernel runs RCU grace periods: normal, or
// expedited machine-wide (/sys/kernel/rcu_expedited, which
// /sys/kernel/rcu_normal overrides). Sessions wait for grace periods
// where the kernel makes them: a nested session's launcher moving into
// its group (cgroup_threadgroup_rwsem, unless cgroup2's favordynmods is
// set) and a standalone run attaching the read-only view audit within a
// grace period of the previous run's detach (a tracepoint's 1->0->1
// rule). A normal grace period takes a few scheduler ticks (4-19 ms on a
// 2-CPU VM with Linux 6.18), an expedited one ~0.1 ms at the price of an
// interrupt on every CPU; which one runs is the machine's choice, which
// doctor reports and the benchmark records.
package rcu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The kernel's knobs (Documentation/admin-guide/kernel-parameters.txt:
// rcupdate.rcu_expedited, rcupdate.rcu_normal), writable by root at run
// time.
const (
	ExpeditedPath = "/sys/kernel/rcu_expedited"
	NormalPath    = "/sys/kernel/rcu_normal"
)

// Settings are the two knobs.
type Settings struct {
	// ExpeditedSet: rcu_expedited is non-zero, every synchronous grace
	// period is expedited unless NormalSet.
	ExpeditedSet bool `json:"rcu_expedited"`
	// NormalSet: rcu_normal is non-zero, every grace period is a normal
	// one whatever rcu_expedited says.
	NormalSet bool `json:"rcu_normal"`
}

// Expedited reports whether synchronous grace periods are expedited.
func (s Settings) Expedited() bool { return s.ExpeditedSet && !s.NormalSet }

// Read reads the knobs. A kernel without them (built without RCU's
// sysfs knobs, or sysfs not mounted) is an error naming the file.
func Read() (Settings, error) {
	e, err := readFlag(ExpeditedPath)
	if err != nil {
		return Settings{}, err
	}
	n, err := readFlag(NormalPath)
	if err != nil {
		return Settings{}, err
	}
	return Settings{ExpeditedSet: e, NormalSet: n}, nil
}

func readFlag(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	return ParseFlag(path, b)
}

// ParseFlag parses one knob's contents, an integer the kernel prints
// with a newline: any value but 0 sets it (the kernel tests it as a C
// int).
func ParseFlag(path string, b []byte) (bool, error) {
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a number", path, b)
	}
	return v != 0, nil
}

// Package procfs parses the two /proc/PID files oxsupervise decides on:
// stat (comm, state, parent, flags) and status (uids, gids, supplementary
// groups). One parser each, so that comm, which may hold spaces and
// parentheses, and the Uid/Gid lines are read the same way by attach, the
// cgroup tree walk, the audit enricher and the daemon's peer checks.
//
// The parsers are plain functions of the file's bytes; the Read functions
// read /proc/PID/... and wrap errors with the path.
package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat holds the fields of /proc/PID/stat oxsupervise uses (proc_pid_stat(5)).
type Stat struct {
	// Comm is the command name, without the parentheses.
	Comm string
	// State is the one-letter state: R, S, D, Z (zombie), X (dead), ...
	State byte
	PPID  int
	// Flags is the kernel's PF_* flags word (PF_KTHREAD for kernel threads).
	Flags uint64
}

// Alive reports whether the process has not yet exited: a zombie (Z) or a
// dead task (X) is gone although its /proc entry is still there. (Liveness
// judged by kill(pid, 0) is wrong where nobody reaps orphans.)
func (s Stat) Alive() bool { return s.State != 'Z' && s.State != 'X' }

// ParseStat parses the contents of /proc/PID/stat. comm is delimited by the
// first '(' and the last ')', since it may itself hold both.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("stat: no (comm)")
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 7 {
		return Stat{}, fmt.Errorf("stat: %d fields after comm, want at least 7", len(f))
	}
	st := Stat{Comm: string(b[open+1 : end]), State: f[0][0]}
	var err error
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("stat: ppid: %w", err)
	}
	if st.Flags, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat: flags: %w", err)
	}
	return st, nil
}

// ReadStat reads and parses /proc/PID/stat. A process that is gone gives
// an error wrapping fs.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	p := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(p)
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", p, err)
	}
	return st, nil
}

// Alive reports whether pid exists and has not exited (see Stat.Alive).
func Alive(pid int) bool {
	st, err := ReadStat(pid)
	return err == nil && st.Alive()
}

// Status holds the identity lines of /proc/PID/status.
type Status struct {
	// UID and GID are the real, effective, saved and filesystem ids.
	UID, GID [4]int
	// Groups are the supplementary groups.
	Groups []int
}

// Real and effective ids, by index into Status.UID and Status.GID.
const (
	Real = iota
	Effective
	Saved
	Filesystem
)

// ParseStatus parses the Uid, Gid and Groups lines of /proc/PID/status;
// a missing or malformed Uid or Gid line is an error.
func ParseStatus(b []byte) (Status, error) {
	var st Status
	var haveUID, haveGID bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var err error
		switch key {
		case "Uid":
			st.UID, err = parseIDs(rest)
			haveUID = err == nil
		case "Gid":
			st.GID, err = parseIDs(rest)
			haveGID = err == nil
		case "Groups":
			for _, w := range strings.Fields(rest) {
				n, err := strconv.Atoi(w)
				if err != nil {
					return Status{}, fmt.Errorf("status: Groups: %w", err)
				}
				st.Groups = append(st.Groups, n)
			}
		}
		if err != nil {
			return Status{}, fmt.Errorf("status: %s: %w", key, err)
		}
	}
	if !haveUID || !haveGID {
		return Status{}, fmt.Errorf("status: no Uid/Gid lines")
	}
	return st, nil
}

func parseIDs(s string) ([4]int, error) {
	var ids [4]int
	f := strings.Fields(s)
	if len(f) != 4 {
		return ids, fmt.Errorf("%d ids, want 4", len(f))
	}
	for i, w := range f {
		n, err := strconv.Atoi(w)
		if err != nil {
			return ids, err
		}
		ids[i] = n
	}
	return ids, nil
}

// ReadStatus reads and parses /proc/PID/status.
func ReadStatus(pid int) (Status, error) {
	p := fmt.Sprintf("/proc/%d/status", pid)
	b, err := os.ReadFile(p)
	if err != nil {
		return Status{}, err
	}
	st, err := ParseStatus(b)
	if err != nil {
		return Status{}, fmt.Errorf("%s: %w", p, err)
	}
	return st, nil
}

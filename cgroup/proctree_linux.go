//go:build linux

package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/procfs"
)

// Which cgroup a process is in, and the process tree below a pid, read from
// /proc.

// CgroupOf returns pid's cgroup2 path (the "0::" line of /proc/PID/cgroup),
// relative to the cgroup2 root, e.g. "/oxsupervise/s1". Inside a cgroup
// namespace the path is relative to the namespace's root.
func CgroupOf(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if path, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return path, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	return "", fmt.Errorf("cgroup of pid %d: %w (no 0:: line in /proc/%d/cgroup)", pid, ErrNoCgroup2, pid)
}

// SessionOf returns the id of the session pid lives in, and false when pid is
// not under the session parent. For a pid in a nested session it is the
// outermost session (the one whose supervisor owns the group); SessionChain
// has the nested ones too.
func SessionOf(cfg Config, pid int) (string, bool, error) {
	chain, err := SessionChain(cfg, pid)
	if err != nil || len(chain) == 0 {
		return "", false, err
	}
	return chain[0], true, nil
}

// SessionChain returns the sessions pid lives in, outermost first: a
// nested session's group lies below its parent's
// (<parent>/<session>/<nested>/...), so the last id is the innermost, the
// session whose rules were written for pid's cgroup. It is empty when pid
// is not under the session parent.
func SessionChain(cfg Config, pid int) ([]string, error) {
	parent := cfg.Parent
	if parent == "" {
		parent = DefaultParent
	}
	if err := validateParent(parent); err != nil {
		return nil, err
	}
	path, err := CgroupOf(pid)
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(path, "/"+filepath.Clean(parent)+"/")
	if !ok {
		return nil, nil
	}
	var chain []string
	for _, id := range strings.Split(rest, "/") {
		if ValidateSessionID(id) != nil {
			break
		}
		chain = append(chain, id)
	}
	return chain, nil
}

// Tasks lists the thread ids of pid.
func Tasks(pid int) ([]int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("threads of pid %d: %w", pid, err)
	}
	return numericNames(entries), nil
}

// Children lists the direct children of pid, forked by any of its threads.
// It reads /proc/PID/task/TID/children; on kernels built without
// CONFIG_PROC_CHILDREN it scans every /proc/PID/stat for the parent pid.
func Children(pid int) ([]int, error) {
	tids, err := Tasks(pid)
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, tid))
		if errors.Is(err, fs.ErrNotExist) {
			if !fileExists(fmt.Sprintf("/proc/%d/task/%d", pid, tid)) {
				continue // the thread exited while we listed
			}
			return childrenByScan(pid)
		}
		if err != nil {
			return nil, fmt.Errorf("children of pid %d: %w", pid, err)
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				kids = append(kids, n)
			}
		}
	}
	slices.Sort(kids)
	return slices.Compact(kids), nil
}

func childrenByScan(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("children of pid %d: %w", pid, err)
	}
	var kids []int
	for _, p := range numericNames(entries) {
		if st, err := procfs.ReadStat(p); err == nil && st.PPID == pid {
			kids = append(kids, p)
		}
	}
	return kids, nil
}

// Descendants lists every descendant of pid (not pid itself), breadth first.
// Processes that exit while it walks are skipped. It is one snapshot: callers
// that need completeness against concurrent forks freeze the group and
// re-scan until the set stops growing.
func Descendants(pid int) ([]int, error) {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return nil, fmt.Errorf("descendants of pid %d: %w", pid, err)
	}
	seen := map[int]bool{pid: true}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		kids, err := Children(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
				queue = append(queue, k)
			}
		}
	}
	return out, nil
}

package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Layout names how cgroup hierarchies are mounted on this machine.
type Layout string

const (
	// LayoutUnified: only cgroup2 is mounted; every controller can live there.
	LayoutUnified Layout = "unified"
	// LayoutHybrid: cgroup2 is mounted next to v1 hierarchies, which usually
	// hold every controller, so cgroup2 offers few or none of them.
	LayoutHybrid Layout = "hybrid"
	// LayoutLegacy: only v1 hierarchies, no cgroup2: sessions cannot be built.
	LayoutLegacy Layout = "legacy"
	// LayoutNone: no cgroup filesystem is mounted at all.
	LayoutNone Layout = "none"
)

// ErrNoCgroup2 is returned when no cgroup2 filesystem is mounted.
var ErrNoCgroup2 = errors.New("no cgroup2 filesystem mounted")

// V1Hierarchy is one mounted cgroup v1 hierarchy.
type V1Hierarchy struct {
	Path        string   `json:"path"`
	Controllers []string `json:"controllers"` // from the mount options, e.g. ["cpu"], ["name=systemd"]
}

// Mounts is what mountinfo says about cgroup filesystems.
type Mounts struct {
	Layout Layout `json:"layout"`
	// Cgroup2 is the mount point of the cgroup2 hierarchy ("" when none).
	Cgroup2 string        `json:"cgroup2,omitempty"`
	V1      []V1Hierarchy `json:"v1,omitempty"`
}

// v1Options are mount options of a cgroup v1 mount that are not controllers.
var v1Options = map[string]bool{
	"rw": true, "ro": true, "noprefix": true, "clone_children": true,
	"xattr": true, "cpuset_v2_mode": true, "favordynmods": true,
}

// ParseMountinfo reads /proc/PID/mountinfo content. When cgroup2 is mounted
// more than once (bind mounts into containers), the mount of the hierarchy's
// root wins over mounts of a subdirectory, then the first listed.
func ParseMountinfo(r io.Reader) (Mounts, error) {
	var m Mounts
	cgroup2Root := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" {
			continue
		}
		// Format: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(text, " - ")
		if !ok {
			return Mounts{}, fmt.Errorf("mountinfo line %d: no ' - ' separator: %q", line, text)
		}
		fields := strings.Fields(pre)
		tail := strings.Fields(post)
		if len(fields) < 6 || len(tail) < 2 {
			return Mounts{}, fmt.Errorf("mountinfo line %d: too few fields: %q", line, text)
		}
		root, mountPoint := unescapeMountinfo(fields[3]), unescapeMountinfo(fields[4])
		switch tail[0] {
		case "cgroup2":
			isRoot := root == "/"
			if m.Cgroup2 == "" || (isRoot && !cgroup2Root) {
				m.Cgroup2, cgroup2Root = mountPoint, isRoot
			}
		case "cgroup":
			var controllers []string
			if len(tail) >= 3 {
				for _, opt := range strings.Split(tail[2], ",") {
					if !v1Options[opt] && !strings.HasPrefix(opt, "release_agent=") {
						controllers = append(controllers, opt)
					}
				}
			}
			m.V1 = append(m.V1, V1Hierarchy{Path: mountPoint, Controllers: controllers})
		}
	}
	if err := sc.Err(); err != nil {
		return Mounts{}, fmt.Errorf("read mountinfo: %w", err)
	}
	switch {
	case m.Cgroup2 != "" && len(m.V1) == 0:
		m.Layout = LayoutUnified
	case m.Cgroup2 != "":
		m.Layout = LayoutHybrid
	case len(m.V1) > 0:
		m.Layout = LayoutLegacy
	default:
		m.Layout = LayoutNone
	}
	return m, nil
}

// unescapeMountinfo undoes the kernel's octal escaping of space, tab,
// newline and backslash in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

package cgroup

import (
	"errors"
	"io"
	"strings"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
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
	Cgroup2 string `json:"cgroup2,omitempty"`
	// Cgroup2Options are the hierarchy's own options (the superblock's,
	// shared by every mount of it: nsdelegate, favordynmods, ...).
	Cgroup2Options []string      `json:"cgroup2_options,omitempty"`
	V1             []V1Hierarchy `json:"v1,omitempty"`
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
	mounts, err := mountinfo.Parse(r)
	if err != nil {
		return Mounts{}, err
	}
	return MountsIn(mounts), nil
}

// MountsIn is ParseMountinfo of mountinfo already parsed.
func MountsIn(mounts []mountinfo.Mount) Mounts {
	var m Mounts
	cgroup2Root := false
	for _, mt := range mounts {
		switch mt.FSType {
		case "cgroup2":
			isRoot := mt.Root == "/"
			if m.Cgroup2 == "" || (isRoot && !cgroup2Root) {
				m.Cgroup2, cgroup2Root = mt.Point, isRoot
				m.Cgroup2Options = strings.Split(mt.SuperOpts, ",")
			}
		case "cgroup":
			var controllers []string
			for _, opt := range strings.Split(mt.SuperOpts, ",") {
				if opt != "" && !v1Options[opt] && !strings.HasPrefix(opt, "release_agent=") {
					controllers = append(controllers, opt)
				}
			}
			m.V1 = append(m.V1, V1Hierarchy{Path: mt.Point, Controllers: controllers})
		}
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
	return m
}

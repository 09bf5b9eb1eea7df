//go:build linux

package loader

// Pinning keeps BPF programs enforcing after the process that loaded them
// is gone (DESIGN §1: the daemon's sessions stay confined across a crash,
// kill -9 or upgrade of the daemon). A link pinned in bpffs stays attached
// until its pin is removed and no descriptor holds it; the maps it uses
// live as long as its program.
//
// Layout below a pin directory (0700, root):
//
//	<dir>/<set>/gen-<N>/links/<program name>
//	<dir>/<set>/gen-<N>/maps/<map name>
//
// set is one group of objects loaded together ("fs", "net"); each layer
// names its own objects (Objects), and package host decides where they are
// pinned (its package comment documents the hierarchy). Every start
// of the daemon pins what it loaded as a new generation N, larger than any
// left behind. Older generations keep enforcing until the new one holds
// every surviving session's rules; then they are retired. Two generations
// attached at once only add refusals: an LSM hook refuses when any program
// does, a cgroup hook when any program in the chain does.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
)

// BPFFSMount is where bpffs is mounted by convention.
const BPFFSMount = "/sys/fs/bpf"

// EnsurePinDir creates dir (mode 0700) on a bpffs mount. When dir lies
// below BPFFSMount and nothing is mounted there, it mounts bpffs there
// first, as systemd does at boot. Any other directory must already be on
// a bpffs mount: pins in a plain directory would keep nothing alive.
func EnsurePinDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("pin directory %q: not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	// A directory that is there on bpffs already (every start but the
	// first) needs no mount found or made: one statfs instead of reading
	// the mount table.
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil && uint32(st.Type) == unix.BPF_FS_MAGIC {
		return restrictPinDir(dir)
	}
	mnt, fstype, err := mountOf(dir)
	if err != nil {
		return fmt.Errorf("pin directory %s: %w", dir, err)
	}
	if fstype != "bpf" && (dir == BPFFSMount || strings.HasPrefix(dir, BPFFSMount+"/")) && mnt != BPFFSMount {
		if err := unix.Mount("bpf", BPFFSMount, "bpf", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700"); err != nil {
			return fmt.Errorf("pin directory %s: mount bpffs on %s: %w", dir, BPFFSMount, err)
		}
		if mnt, fstype, err = mountOf(dir); err != nil {
			return fmt.Errorf("pin directory %s: %w", dir, err)
		}
	}
	if fstype != "bpf" {
		return fmt.Errorf("pin directory %s is on %s (%s), not on a bpffs mount: mount one (mount -t bpf bpf %s) or choose a directory on one", dir, mnt, fstype, BPFFSMount)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin directory %s: %w", dir, err)
	}
	return restrictPinDir(dir)
}

// restrictPinDir makes the pin directory dir root's alone.
func restrictPinDir(dir string) error {
	// MkdirAll keeps the mode of a directory that exists: pins are root's
	// alone (a user who could unlink them could end enforcement once no
	// process holds the links).
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pin directory %s: %w", dir, err)
	}
	return nil
}

// mountOf returns the mount point that holds path and its filesystem
// type, from /proc/self/mountinfo (the last mount of the longest matching
// mount point is the visible one).
func mountOf(path string) (mountPoint, fstype string, err error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", "", fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	for _, m := range mounts {
		if m.Point != "/" && path != m.Point && !strings.HasPrefix(path, m.Point+"/") {
			continue
		}
		if len(m.Point) >= len(mountPoint) {
			mountPoint, fstype = m.Point, m.FSType
		}
	}
	if mountPoint == "" {
		return "", "", errors.New("no mount holds it in /proc/self/mountinfo")
	}
	return mountPoint, fstype, nil
}

// Objects are what one layer pins: its links and maps by name (a link
// by its program's name, a map by the map's). Each layer lists its own
// (fsguard.Guard.Objects, egress.Enforcer.Objects), the shared event maps
// included. Programs are pinned unattached, for a layer that attaches
// only while it has sessions (the read-only view's audit) and is reopened
// rather than loaded and verified again (package host's Cache).
type Objects struct {
	Links    map[string]link.Link
	Maps     map[string]*ebpf.Map
	Programs map[string]*ebpf.Program
}

// PinSet is one group of objects loaded together, below a pin directory.
type PinSet struct {
	Dir string // <pin dir>/<set>
}

// Generation is one daemon start's pinned objects of a set.
type Generation struct {
	Dir string
	N   uint64
}

const genPrefix = "gen-"

// Generations lists the set's generations, oldest first.
func (s PinSet) Generations() ([]Generation, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pinned generations: %w", err)
	}
	var gens []Generation
	for _, e := range entries {
		v, ok := strings.CutPrefix(e.Name(), genPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			continue
		}
		gens = append(gens, Generation{Dir: filepath.Join(s.Dir, e.Name()), N: n})
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i].N < gens[j].N })
	return gens, nil
}

// Pin pins objs as a new generation, numbered after every existing one.
// On error nothing of the new generation stays pinned.
func (s PinSet) Pin(objs Objects) (Generation, error) {
	gens, err := s.Generations()
	if err != nil {
		return Generation{}, err
	}
	var n uint64 = 1
	if len(gens) > 0 {
		n = gens[len(gens)-1].N + 1
	}
	g := Generation{Dir: filepath.Join(s.Dir, genPrefix+strconv.FormatUint(n, 10)), N: n}
	for _, sub := range []string{"links", "maps"} {
		if err := os.MkdirAll(filepath.Join(g.Dir, sub), 0o700); err != nil {
			return Generation{}, fmt.Errorf("pinned generation %s: %w", g.Dir, err)
		}
	}
	if err := g.pin(objs); err != nil {
		return Generation{}, errors.Join(err, g.Remove())
	}
	return g, nil
}

func (g Generation) pin(objs Objects) error {
	for name, m := range objs.Maps {
		if m == nil || strings.HasPrefix(name, ".") {
			// The programs' global data (.bss, .rodata): nothing outside
			// them reads it, their programs keep it alive, and Linux 6.1
			// refuses to pin an mmapable .bss (EPERM).
			continue
		}
		// Pinning a clone leaves the caller's map unpinned: closing it
		// is the caller's, unpinning the generation's.
		c, err := m.Clone()
		if err != nil {
			return fmt.Errorf("pin map %s: %w", name, err)
		}
		err = c.Pin(filepath.Join(g.Dir, "maps", name))
		c.Close()
		if err != nil {
			return fmt.Errorf("pin map %s: %w", name, err)
		}
	}
	for name, l := range objs.Links {
		if l == nil {
			continue
		}
		if err := pinLink(l, filepath.Join(g.Dir, "links", name)); err != nil {
			return fmt.Errorf("pin link %s: %w", name, err)
		}
	}
	for name, p := range objs.Programs {
		if p == nil {
			continue
		}
		// A clone, as for the maps: the caller's program stays unpinned.
		c, err := p.Clone()
		if err != nil {
			return fmt.Errorf("pin program %s: %w", name, err)
		}
		err = c.Pin(filepath.Join(g.Dir, "progs", name))
		c.Close()
		if err != nil {
			return fmt.Errorf("pin program %s: %w", name, err)
		}
	}
	return nil
}

// pinLink pins l at path through a descriptor of its own, so that the
// caller's link object stays unpinned (cilium/ebpf's Link.Pin would make
// its Close leave the pin, and Unpin remove it).
func pinLink(l link.Link, path string) error {
	info, err := l.Info()
	if err != nil {
		return err
	}
	own, err := link.NewFromID(info.ID)
	if err != nil {
		return err
	}
	defer own.Close()
	return own.Pin(path)
}

// Links names the links pinned in g.
func (g Generation) Links() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(g.Dir, "links"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// SessionKeys returns the keys of g's pinned map name, a hash map keyed
// by a u64 cgroup id (the programs' session maps).
func (g Generation) SessionKeys(name string) ([]uint64, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(g.Dir, "maps", name), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("open pinned map %s of %s: %w", name, g.Dir, err)
	}
	defer m.Close()
	if m.KeySize() != 8 {
		return nil, fmt.Errorf("pinned map %s of %s has %d-byte keys, not cgroup ids", name, g.Dir, m.KeySize())
	}
	var (
		keys []uint64
		key  uint64
	)
	it := m.Iterate()
	for it.Next(&key, new([]byte)) {
		keys = append(keys, key)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read pinned map %s of %s: %w", name, g.Dir, err)
	}
	return keys, nil
}

// DrainEvents reads and discards every record queued in g's pinned ring
// buffer (bpf/events.h) and counts them by source: refusals its programs
// reported after the process reading them was gone. Only the header's
// source is read; the rest of a record has the layout of the binary that
// loaded g.
func (g Generation) DrainEvents() (map[Source]uint64, error) {
	name := eventRingMap
	m, err := ebpf.LoadPinnedMap(filepath.Join(g.Dir, "maps", name), nil)
	if err != nil {
		return nil, fmt.Errorf("open pinned ring buffer %s of %s: %w", name, g.Dir, err)
	}
	defer m.Close()
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, fmt.Errorf("read pinned ring buffer %s of %s: %w", name, g.Dir, err)
	}
	defer rd.Close()
	rd.SetDeadline(time.Now())
	counts := map[Source]uint64{}
	for {
		rec, err := rd.Read()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return counts, nil
			}
			return counts, fmt.Errorf("read pinned ring buffer %s of %s: %w", name, g.Dir, err)
		}
		var src Source
		if len(rec.RawSample) >= 4 {
			src = Source(binary.NativeEndian.Uint32(rec.RawSample))
		}
		counts[src]++
	}
}

// Remove unpins g: links first (a link no descriptor holds detaches when
// its last pin goes), then maps, then the directories.
func (g Generation) Remove() error {
	var errs []error
	for _, sub := range []string{"links", "maps", "progs"} {
		dir := filepath.Join(g.Dir, sub)
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, e := range entries {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("unpin %s: %w", e.Name(), err))
			}
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := removeRecord(g.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(g.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("retire pinned generation %s: %w", g.Dir, err)
	}
	return nil
}

// TaggedMaps returns the maps of a bpf2go struct (NetMaps and the like)
// by their `ebpf` tags, the maps' names in the object: what a layer
// loaded through a generated struct pins.
func TaggedMaps(v any) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	rv := reflect.Indirect(reflect.ValueOf(v))
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Type().Field(i)
		if f.Anonymous {
			for name, m := range TaggedMaps(rv.Field(i).Addr().Interface()) {
				out[name] = m
			}
			continue
		}
		if m, ok := rv.Field(i).Interface().(*ebpf.Map); ok && m != nil && f.Tag.Get("ebpf") != "" {
			out[f.Tag.Get("ebpf")] = m
		}
	}
	return out
}

// Objects returns the filesystem programs' links (by program name) and
// maps, the shared event maps included, for pinning.
func (p *FSPrograms) Objects() Objects {
	objs := Objects{Links: map[string]link.Link{}, Maps: map[string]*ebpf.Map{}}
	for name, m := range p.pinnedMaps {
		objs.Maps[name] = m
	}
	for i, coll := range p.colls {
		for name, m := range coll.Maps {
			switch {
			case strings.HasPrefix(name, "."):
				// Global data (.bss, .rodata): not pinned (see pin), and
				// a prefix must not hide that.
			case i == 0:
				objs.Maps[name] = m
			case name == fsSessionsMap || name == eventRingMap || name == eventLostMap || name == eventFloodMap:
				// The first object's, given to this one.
			default:
				// Another object's own map (its .rodata, say) may
				// share a name with the first object's.
				objs.Maps[lsmObjects[i].pinPrefix+name] = m
			}
		}
	}
	for i, l := range p.links {
		objs.Links[p.linkNames[i]] = l
	}
	return objs
}

// Named returns the shared event maps by their names in every object, for
// pinning them with each layer that reports through them.
func (m *EventMaps) Named() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{eventRingMap: m.Ring, eventLostMap: m.Lost, eventFloodMap: m.Flood}
}

// ProgramIDs returns the kernel ids of the programs g's pinned links
// hold, sorted: which programs a pinned set keeps attached.
func (g Generation) ProgramIDs() ([]ebpf.ProgramID, error) {
	names, err := g.Links()
	if err != nil {
		return nil, err
	}
	var ids []ebpf.ProgramID
	for _, name := range names {
		l, err := link.LoadPinnedLink(filepath.Join(g.Dir, "links", name), nil)
		if err != nil {
			return nil, fmt.Errorf("open pinned link %s: %w", name, err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			return nil, fmt.Errorf("pinned link %s: %w", name, err)
		}
		ids = append(ids, info.Program)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

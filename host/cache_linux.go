//go:build linux

package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/planner"
)

// ErrPinsBusy is the pin error of a Cache whose pins another supervisor
// holds: this one loads its own programs, in its process only.
var ErrPinsBusy = errors.New("the pinned programs are in use by another supervisor")

// Cache is the standalone supervisor's Pinning: the programs one `run` or
// `attach` loaded stay pinned, attached and idle, when it exits, and the
// next one opens them from their pins instead of loading and verifying
// them again. Below Dir:
//
//	run/<objects version>-ring<bytes>/events/maps/<map>    the shared event maps
//	run/<objects version>-ring<bytes>/net-<parent cgroup id>/{links,maps}/<name>
//	run/<objects version>-ring<bytes>/fs/{links,maps}/<name>
//	run/<objects version>-ring<bytes>/roview/{progs,maps}/<name>  unattached
//	run/<objects version>-ring<bytes>/<set>/record-<digest>        what was pinned
//
// A reopen checks the network set against its record (loader.PinAt's) rather
// than parsing the object file again.
// The objects version is a digest of the BPF objects the binary embeds
// (loader.ObjectsVersion): another binary's pins are never reused. One
// supervisor at a time holds the directory (an exclusive flock on it, for
// as long as its host is open), because the pinned programs report into
// one ring buffer and its reader must be the supervisor of every session
// in their maps; a supervisor that finds it held loads its own programs,
// as without a cache.
//
// Who cleans up: nobody needs to while the version is current — the
// programs judge only the sessions in their maps, and each run removes its
// own session on exit. A binary with other objects removes the
// directories of other versions it can hold whose session maps name no
// live session group, so a kill -9'd run's orphans stay confined. `rm -r
// /sys/fs/bpf/oxsupervise` removes everything.
type Cache struct {
	Dir string
	// Cgroup is where the sessions' groups are (to tell which sessions
	// are alive).
	Cgroup cgroup.Config

	dir   string // run/<version>-ring<bytes>
	lease *os.File
}

// Prepare implements Pinning.
func (c *Cache) Prepare(ringSize int) error {
	if ringSize == 0 {
		ringSize = loader.DefaultRingSize
	}
	if err := loader.EnsurePinDir(c.Dir); err != nil {
		return err
	}
	name := fmt.Sprintf("%s-ring%d", loader.ObjectsVersion(), ringSize)
	dir := filepath.Join(c.Dir, "run", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin directory %s: %w", dir, err)
	}
	f, err := lock(dir)
	if err != nil {
		return err
	}
	c.dir, c.lease = dir, f
	c.prune(name)
	return nil
}

// lock takes the exclusive lease of dir without waiting.
func lock(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("pin directory %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrPinsBusy)
		}
		return nil, fmt.Errorf("lock pin directory %s: %w", dir, err)
	}
	return f, nil
}

// prune removes the directories of other versions (or ring sizes) that
// nobody holds and that confine no live session.
func (c *Cache) prune(keep string) {
	entries, _ := os.ReadDir(filepath.Join(c.Dir, "run"))
	for _, e := range entries {
		if e.Name() == keep || !e.IsDir() {
			continue
		}
		dir := filepath.Join(c.Dir, "run", e.Name())
		f, err := lock(dir)
		if err != nil {
			continue
		}
		if !c.confinesLiveSession(dir) {
			removeSets(dir)
			os.Remove(dir)
		}
		f.Close()
	}
}

// confinesLiveSession reports whether a session map below dir names a
// session group that still exists (or whether that cannot be told: then
// the directory is kept).
func (c *Cache) confinesLiveSession(dir string) bool {
	live, err := c.liveSessions()
	if err != nil {
		return true
	}
	maps, _ := filepath.Glob(filepath.Join(dir, "*", "maps", "*_sessions"))
	for _, m := range maps {
		keys, err := loader.Generation{Dir: filepath.Dir(filepath.Dir(m))}.SessionKeys(filepath.Base(m))
		if err != nil {
			return true
		}
		for _, id := range keys {
			if live[id] {
				return true
			}
		}
	}
	return false
}

// liveSessions are the cgroup ids of the session groups below c.Cgroup.
func (c *Cache) liveSessions() (map[uint64]bool, error) {
	ids, err := cgroup.ListSessions(c.Cgroup)
	if err != nil {
		return nil, err
	}
	live := map[uint64]bool{}
	for _, id := range ids {
		g, err := cgroup.OpenSession(c.Cgroup, id)
		if err != nil {
			return nil, err
		}
		live[g.CgroupID] = true
	}
	return live, nil
}

// removeSets unpins every set below dir. The directory itself stays: it
// is the lease its holder's lock is on.
func removeSets(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		loader.RemovePinned(filepath.Join(dir, e.Name()))
	}
}

func (c *Cache) setDir(layer string, parent uint64) string {
	if layer == planner.LayerNetwork {
		return filepath.Join(c.dir, "net-"+strconv.FormatUint(parent, 10))
	}
	return filepath.Join(c.dir, SetName(layer))
}

// Events implements Pinning. Without pinned event maps, what else is
// pinned reports through maps nobody can read again: it is removed.
func (c *Cache) Events() (*loader.EventMaps, error) {
	dir := filepath.Join(c.dir, "events")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		removeSets(c.dir)
		return nil, nil
	}
	m, err := loader.OpenPinnedEventMaps(dir)
	if err != nil {
		removeSets(c.dir)
		return nil, fmt.Errorf("pinned event maps not reused: %w", err)
	}
	return m, nil
}

// PinEvents implements Pinning.
func (c *Cache) PinEvents(events *loader.EventMaps) error {
	return loader.PinAt(filepath.Join(c.dir, "events"), loader.Objects{Maps: events.Named()})
}

// Reusable implements Pinning.
func (c *Cache) Reusable(layer string, parent uint64) string {
	dir := c.setDir(layer, parent)
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return dir
}

// Discard implements Pinning.
func (c *Cache) Discard(layer string, parent uint64) error {
	return loader.RemovePinned(c.setDir(layer, parent))
}

// Pin implements Pinning.
func (c *Cache) Pin(layer string, parent uint64, objs loader.Objects) (Pinned, error) {
	dir := c.setDir(layer, parent)
	if err := loader.PinAt(dir, objs); err != nil {
		return Pinned{}, err
	}
	return Pinned{Layer: layer, Set: loader.PinSet{Dir: dir}, Generation: loader.Generation{Dir: dir}}, nil
}

// keepsPrograms: the read-only view's audit program is pinned unattached.
func (*Cache) keepsPrograms() {}

// Release implements Pinning.
func (c *Cache) Release() error {
	if c.lease == nil {
		return nil
	}
	err := c.lease.Close()
	c.lease = nil
	return err
}

//go:build linux

package loader

// Reopening pinned objects: a supervisor that finds the programs an
// earlier one pinned (package host's Cache) opens them from their pins
// instead of loading, verifying and attaching them again. Every map is
// checked against this binary's declaration of it, and the pins live
// below a directory named after ObjectsVersion, so objects of another
// build are never reused.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// ObjectsVersion names the BPF objects this binary embeds: a digest of the
// BPF-LSM, network and read-only view objects (programs and map layouts
// alike), after the version of the pin layout (v3: with a pin record that
// covers pinned programs too).
// Pins a binary reopens live below a directory of this name, so a binary
// with other objects, or another layout, never reuses them.
// The digest is computed by `make generate` (objversion_bpfel.go), not at every
// start: hashing the ~260 KiB of objects cost each standalone run ~0.2 ms.
func ObjectsVersion() string {
	return "v3-" + objectsDigest
}

// PinAt pins objs below dir, as dir/links/<name>, dir/maps/<name> and
// dir/progs/<name>, and records what it pinned (pinrecord_linux.go).
// On error nothing stays pinned there.
func PinAt(dir string, objs Objects) error {
	g := Generation{Dir: dir}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("pin directory %s: already holds pins", dir)
	}
	subs := []string{"links", "maps"}
	if len(objs.Programs) > 0 {
		subs = append(subs, "progs")
	}
	for _, sub := range subs {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return fmt.Errorf("pin directory %s: %w", dir, err)
		}
	}
	if err := g.pin(objs); err != nil {
		return errors.Join(err, g.Remove())
	}
	if err := writeRecord(dir, objs); err != nil {
		return errors.Join(err, g.Remove())
	}
	return nil
}

// RemovePinned unpins what PinAt pinned at dir.
func RemovePinned(dir string) error { return Generation{Dir: dir}.Remove() }

// OpenPinnedEventMaps opens the shared event maps PinAt pinned at dir,
// checked against PinAt's record (pinrecord_linux.go): no parse of an
// object file on this path.
func OpenPinnedEventMaps(dir string) (*EventMaps, error) {
	maps := map[string]*ebpf.Map{}
	fail := func(err error) (*EventMaps, error) {
		for _, m := range maps {
			m.Close()
		}
		return nil, fmt.Errorf("pinned event maps %s: %w", dir, err)
	}
	for _, name := range []string{eventRingMap, eventLostMap, eventFloodMap} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "maps", name), nil)
		if err != nil {
			return fail(fmt.Errorf("open pinned map %s: %w", name, err))
		}
		maps[name] = m
	}
	ids, err := mapIDs(maps)
	if err != nil {
		return fail(err)
	}
	if err := checkRecord(dir, maps, ids, nil, nil); err != nil {
		return fail(err)
	}
	return &EventMaps{Ring: maps[eventRingMap], Lost: maps[eventLostMap], Flood: maps[eventFloodMap], ids: ids}, nil
}

// openPinnedMaps opens dir/maps/<name> for each name, each checked
// against spec's map of that name (the ring buffer's size is the one
// property a pin chooses).
func openPinnedMaps(dir string, spec *ebpf.CollectionSpec, names []string) (map[string]*ebpf.Map, error) {
	out := map[string]*ebpf.Map{}
	fail := func(err error) (map[string]*ebpf.Map, error) {
		for _, m := range out {
			m.Close()
		}
		return nil, err
	}
	for _, name := range names {
		ms, ok := spec.Maps[name]
		if !ok {
			return fail(fmt.Errorf("map %s is not in this binary's object", name))
		}
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "maps", name), nil)
		if err != nil {
			return fail(fmt.Errorf("open pinned map %s: %w", name, err))
		}
		out[name] = m
		if name == eventRingMap {
			ms = ms.Copy()
			ms.MaxEntries = m.MaxEntries()
		}
		if err := ms.Compatible(m); err != nil {
			return fail(fmt.Errorf("pinned map %s of %s: %w", name, dir, err))
		}
	}
	return out, nil
}

// LoadPinnedNetPrograms opens the network objects PinAt pinned at dir
// instead of loading and attaching them again: every map into objs (its
// programs stay nil: the pinned links hold them attached), and the
// pinned links with their names. events must be the event maps the
// pinned programs report through. The pins are checked against PinAt's
// record, not against the object file: no parse of it on this path.
func LoadPinnedNetPrograms(objs *NetObjects, events *EventMaps, dir string) ([]link.Link, []string, error) {
	fields := map[string]reflect.Value{}
	rv := reflect.ValueOf(&objs.netMaps).Elem()
	maps := map[string]*ebpf.Map{}
	closeMaps := func() {
		for _, m := range maps {
			m.Close()
		}
	}
	for i := 0; i < rv.NumField(); i++ {
		tag := rv.Type().Field(i).Tag.Get("ebpf")
		if tag == "" {
			continue
		}
		fields[tag] = rv.Field(i)
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "maps", tag), nil)
		if err != nil {
			closeMaps()
			return nil, nil, fmt.Errorf("open pinned map %s: %w", tag, err)
		}
		maps[tag] = m
	}
	links, linkNames, err := loadPinnedLinks(dir, -1)
	if err != nil {
		closeMaps()
		return nil, nil, err
	}
	ids, err := mapIDs(maps)
	if err == nil {
		err = checkRecord(dir, maps, ids, nil, linkNames)
	}
	if err == nil {
		var same bool
		if same, err = events.sameAs(ids); err == nil && !same {
			err = errors.New("its programs report through other event maps")
		}
	}
	if err != nil {
		closeMaps()
		for _, l := range links {
			l.Close()
		}
		return nil, nil, fmt.Errorf("pinned network objects %s: %w", dir, err)
	}
	for name, m := range maps {
		fields[name].Set(reflect.ValueOf(m))
	}
	return links, linkNames, nil
}

// sameAs reports whether every event map is, by kernel id, the map of
// its name in got.
func (m *EventMaps) sameAs(got map[string]ebpf.MapID) (bool, error) {
	want, err := m.namedIDs()
	if err != nil {
		return false, err
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			return false, nil
		}
	}
	return true, nil
}

// loadPinnedLinks opens every link pinned in dir/links, which must hold
// exactly want of them when want is not negative (one per program: a set
// left half pinned is not reused).
func loadPinnedLinks(dir string, want int) ([]link.Link, []string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "links"))
	if err != nil {
		return nil, nil, fmt.Errorf("pinned links of %s: %w", dir, err)
	}
	if want >= 0 && len(entries) != want {
		return nil, nil, fmt.Errorf("pinned links of %s: %d, want %d (one per program)", dir, len(entries), want)
	}
	var links []link.Link
	var names []string
	for _, e := range entries {
		l, err := link.LoadPinnedLink(filepath.Join(dir, "links", e.Name()), nil)
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			return nil, nil, fmt.Errorf("open pinned link %s: %w", e.Name(), err)
		}
		links = append(links, l)
		names = append(names, e.Name())
	}
	return links, names, nil
}

// LoadPinnedFS opens the BPF-LSM objects PinAt pinned at dir (the
// Objects of an FSPrograms: every object's maps under their pin names,
// lsmObjects' pinPrefix for all but the first) instead of loading and
// attaching them again. events must be the event maps the pinned programs
// report through. The set must be whole: every program the objects always
// attach, one variant of each hook whose signature changed, optional
// hooks or not.
func LoadPinnedFS(events *EventMaps, dir string) (*FSPrograms, error) {
	var specs []*ebpf.CollectionSpec
	for _, o := range lsmObjects {
		spec, err := o.load()
		if err != nil {
			return nil, fmt.Errorf("load %s program spec: %w", o.what, err)
		}
		specs = append(specs, spec)
	}
	p := &FSPrograms{pinnedMaps: map[string]*ebpf.Map{}}
	fail := func(err error) (*FSPrograms, error) {
		p.Close()
		return nil, fmt.Errorf("pinned BPF-LSM objects %s: %w", dir, err)
	}
	for i, spec := range specs {
		var names, pinNames []string
		for name := range spec.Maps {
			shared := name == fsSessionsMap || name == eventRingMap || name == eventLostMap || name == eventFloodMap
			if strings.HasPrefix(name, ".") || (i > 0 && shared) {
				continue // not pinned (global data), or the first object's
			}
			names = append(names, name)
			pinNames = append(pinNames, lsmObjects[i].pinPrefix+name)
		}
		renamed := spec.Copy()
		for j, name := range names {
			renamed.Maps[pinNames[j]] = spec.Maps[name]
		}
		maps, err := openPinnedMaps(dir, renamed, pinNames)
		if err != nil {
			return fail(err)
		}
		for name, m := range maps {
			p.pinnedMaps[name] = m
		}
	}
	p.Sessions, p.Anchors = p.pinnedMaps[fsSessionsMap], p.pinnedMaps["fs_anchors"]
	p.Names, p.GlobScopes = p.pinnedMaps["fs_names"], p.pinnedMaps["fs_glob_scopes"]
	ids, err := mapIDs(p.pinnedMaps)
	if err != nil {
		return fail(err)
	}
	if same, err := events.sameAs(ids); err != nil || !same {
		return fail(errors.Join(err, errors.New("its programs report through other event maps")))
	}
	if p.links, p.linkNames, err = loadPinnedLinks(dir, -1); err != nil {
		return fail(err)
	}
	hooks, err := wholeLSMSet(specs, p.linkNames)
	if err != nil {
		return fail(err)
	}
	p.Attached = hooks
	return p, nil
}

// wholeLSMSet checks that linked names every program LoadFS always
// attaches and exactly one variant of each hook that has variants, and
// returns the hooks they are attached to.
func wholeLSMSet(specs []*ebpf.CollectionSpec, linked []string) ([]string, error) {
	progs := map[string]*ebpf.ProgramSpec{}
	for _, spec := range specs {
		for name, ps := range spec.Programs {
			progs[name] = ps
		}
	}
	have := map[string]bool{}
	var hooks []string
	for _, name := range linked {
		ps, ok := progs[name]
		if !ok {
			return nil, fmt.Errorf("pinned link %s is not a program of these objects", name)
		}
		have[name] = true
		hooks = append(hooks, ps.AttachTo)
	}
	optional := map[string]bool{}
	for _, prog := range fsOptional {
		optional[prog] = true
	}
	for hook, byArgs := range fsVariants {
		n := 0
		for _, prog := range byArgs {
			optional[prog] = true
			if have[prog] {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("%d programs of hook %s pinned, want one", n, hook)
		}
	}
	for name := range progs {
		if !optional[name] && !have[name] {
			return nil, fmt.Errorf("program %s is not pinned", name)
		}
	}
	return hooks, nil
}

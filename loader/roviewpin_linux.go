//go:build linux

package loader

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
)

// Reopening the read-only view's audit object: it has no link to pin (its
// program runs on every system call of the machine, so it is attached
// only while a session needs it), but its program and maps can stay
// pinned, loaded and verified, for the next standalone supervisor to open
// instead of loading them again (package host's Cache).

// roviewProgram is the object's one program, by its pin name.
const roviewProgram = "roview_sys_exit"

// ROViewPinObjects are what PinAt pins of objs: the program, unattached,
// and its maps (the shared event maps among them, as every layer pins
// them).
func ROViewPinObjects(objs *ROViewObjects) Objects {
	return Objects{
		Maps: map[string]*ebpf.Map{
			"roview_sessions": objs.RoviewSessions, "roview_syscalls": objs.RoviewSyscalls,
			eventRingMap: objs.OxsEvents, eventLostMap: objs.OxsEventsLost, eventFloodMap: objs.OxsFlood,
		},
		Programs: map[string]*ebpf.Program{roviewProgram: objs.RoviewSysExit},
	}
}

// LoadPinnedROView opens into objs the program and maps PinAt pinned at
// dir (ROViewPinObjects), instead of loading and verifying them. Every
// map is checked against this binary's declaration, the event maps must
// be events (the ring the caller reads), and the program must be a raw
// tracepoint program using exactly those maps. The session table is
// emptied (the program is unattached: no session of a running supervisor
// is in it) and the system call table filled again.
func LoadPinnedROView(objs *ROViewObjects, events *EventMaps, dir string) error {
	spec, err := loadRoview()
	if err != nil {
		return fmt.Errorf("load read-only view audit spec: %w", err)
	}
	names := []string{"roview_sessions", "roview_syscalls", eventRingMap, eventLostMap, eventFloodMap}
	maps, err := openPinnedMaps(dir, spec, names)
	if err != nil {
		return err
	}
	closeMaps := func() {
		for _, m := range maps {
			m.Close()
		}
	}
	same, err := sameMaps(events.Named(), maps)
	if err == nil && !same {
		err = errors.New("its program reports through other event maps")
	}
	if err != nil {
		closeMaps()
		return fmt.Errorf("pinned read-only view audit %s: %w", dir, err)
	}
	prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, "progs", roviewProgram), nil)
	if err != nil {
		closeMaps()
		return fmt.Errorf("open pinned program %s: %w", roviewProgram, err)
	}
	if err := usesMaps(prog, spec.Programs[roviewProgram].Type, maps); err != nil {
		prog.Close()
		closeMaps()
		return fmt.Errorf("pinned read-only view audit %s: %w", dir, err)
	}
	*objs = ROViewObjects{}
	objs.RoviewSysExit = prog
	objs.RoviewSessions, objs.RoviewSyscalls = maps["roview_sessions"], maps["roview_syscalls"]
	objs.OxsEvents, objs.OxsEventsLost, objs.OxsFlood = maps[eventRingMap], maps[eventLostMap], maps[eventFloodMap]
	if err := clearMap(objs.RoviewSessions); err != nil {
		objs.Close()
		return fmt.Errorf("pinned read-only view audit %s: empty its sessions: %w", dir, err)
	}
	if err := fillROViewSyscalls(objs); err != nil {
		objs.Close()
		return err
	}
	return nil
}

// usesMaps checks that prog is of type typ and uses every map of maps.
func usesMaps(prog *ebpf.Program, typ ebpf.ProgramType, maps map[string]*ebpf.Map) error {
	info, err := prog.Info()
	if err != nil {
		return fmt.Errorf("program info: %w", err)
	}
	if info.Type != typ {
		return fmt.Errorf("program %s is of type %s, want %s", info.Name, info.Type, typ)
	}
	used, ok := info.MapIDs()
	if !ok {
		return errors.New("the kernel does not say which maps the program uses")
	}
	for name, m := range maps {
		mi, err := m.Info()
		if err != nil {
			return fmt.Errorf("map %s info: %w", name, err)
		}
		id, _ := mi.ID()
		if !slices.Contains(used, id) {
			return fmt.Errorf("program %s does not use the pinned map %s", info.Name, name)
		}
	}
	return nil
}

// clearMap deletes every key of a hash map.
func clearMap(m *ebpf.Map) error {
	var keys [][]byte
	var key []byte
	it := m.Iterate()
	var value []byte
	for it.Next(&key, &value) {
		keys = append(keys, slices.Clone(key))
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

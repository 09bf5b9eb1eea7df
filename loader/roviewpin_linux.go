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
// dir (ROViewPinObjects), instead of loading and verifying them. The pins
// are checked against PinAt's record (the very program and maps pinned
// there, by a binary of these objects: no parse of the object file), the
// event maps must be events (the ring the caller reads), and the program
// must use exactly those maps. The session table is emptied (the program
// is unattached: no session of a running supervisor is in it) and the
// system call table filled again.
func LoadPinnedROView(objs *ROViewObjects, events *EventMaps, dir string) error {
	maps := map[string]*ebpf.Map{}
	var prog *ebpf.Program
	fail := func(err error) error {
		for _, m := range maps {
			m.Close()
		}
		if prog != nil {
			prog.Close()
		}
		return fmt.Errorf("pinned read-only view audit %s: %w", dir, err)
	}
	for _, name := range []string{"roview_sessions", "roview_syscalls", eventRingMap, eventLostMap, eventFloodMap} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "maps", name), nil)
		if err != nil {
			return fail(fmt.Errorf("open pinned map %s: %w", name, err))
		}
		maps[name] = m
	}
	prog, err := loadPinnedProgram(filepath.Join(dir, "progs", roviewProgram))
	if err != nil {
		prog = nil
		return fail(fmt.Errorf("open pinned program %s: %w", roviewProgram, err))
	}
	ids, err := mapIDs(maps)
	if err != nil {
		return fail(err)
	}
	if err := checkRecord(dir, maps, ids, map[string]*ebpf.Program{roviewProgram: prog}, nil); err != nil {
		return fail(err)
	}
	if same, err := events.sameAs(ids); err != nil || !same {
		return fail(errors.Join(err, errors.New("its program reports through other event maps")))
	}
	if err := usesMaps(prog, ids); err != nil {
		return fail(err)
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

// usesMaps checks that prog uses every map of ids.
func usesMaps(prog *ebpf.Program, ids map[string]ebpf.MapID) error {
	info, err := progInfo(prog)
	if err != nil {
		return err
	}
	for name, id := range ids {
		if !slices.Contains(info.Maps, id) {
			return fmt.Errorf("program %d does not use the pinned map %s", info.ID, name)
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

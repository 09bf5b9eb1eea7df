//go:build linux

package loader

// The pin record: what PinAt pinned, written down as it pinned it, so a
// reopen can check the pins it finds without parsing the object file
// again (parsing the network object costs ~2 ms of every `run`, the
// read-only view's ~0.5 ms, issue 18): the shared event maps, the network
// set and the read-only view's set are all checked this way.
// The record is a digest of every pinned map (name, kernel id, type, key
// and value size, entries, flags), every pinned program (name, kernel id,
// type) and every pinned link's name, kept as
// the name of an empty directory beside maps/ and links/ (bpffs holds no
// regular files). Its guarantee is the spec check's and more: the pins sit
// below a directory named after ObjectsVersion, so the binary that pinned
// them declared the same maps as this one; the record adds that they are
// still the very kernel objects it pinned (a map or program pinned over
// one, or a link removed, changes the digest), and a set without a record is never
// reused.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
)

// recordPrefix starts the name of a pin directory's record.
const recordPrefix = "record-"

// errNoRecord: a pin directory without a record (or with several) is not
// reused.
var errNoRecord = errors.New("no record of what was pinned")

// pinDigest is the digest of maps (by pin name, with their kernel ids),
// programs (by pin name) and link names.
func pinDigest(maps map[string]*ebpf.Map, ids map[string]ebpf.MapID, progs map[string]*ebpf.Program, links []string) (string, error) {
	h := sha256.New()
	for _, name := range sortedKeys(maps) {
		m := maps[name]
		fmt.Fprintf(h, "map %q\n", name)
		binary.Write(h, binary.LittleEndian, []uint32{uint32(ids[name]), uint32(m.Type()), m.KeySize(), m.ValueSize(), m.MaxEntries(), m.Flags()})
	}
	for _, name := range sortedKeys(progs) {
		info, err := progInfo(progs[name])
		if err != nil {
			return "", fmt.Errorf("program %s: %w", name, err)
		}
		fmt.Fprintf(h, "program %q\n", name)
		binary.Write(h, binary.LittleEndian, []uint32{uint32(info.ID), info.Type})
	}
	links = append([]string(nil), links...)
	sort.Strings(links)
	for _, name := range links {
		fmt.Fprintf(h, "link %q\n", name)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

func sortedKeys[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// mapIDs returns the kernel id of each map: one query of the kernel per
// map, shared by every check of a reopen (the record, the event maps the
// programs report through, the maps a program uses).
func mapIDs(maps map[string]*ebpf.Map) (map[string]ebpf.MapID, error) {
	ids := make(map[string]ebpf.MapID, len(maps))
	for name, m := range maps {
		id, err := mapID(m)
		if err != nil {
			return nil, fmt.Errorf("map %s: %w", name, err)
		}
		ids[name] = id
	}
	return ids, nil
}

// pinnedMapsOf returns the maps of objs that pin pins (not the programs'
// global data, not nil ones).
func pinnedMapsOf(objs Objects) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	for name, m := range objs.Maps {
		if m != nil && !strings.HasPrefix(name, ".") {
			out[name] = m
		}
	}
	return out
}

// writeRecord records, in dir, what PinAt pinned there from objs. It reads
// the maps and programs back from their pins, as a reopen will (the
// kernel's view of a map, not the creator's: its flags and sizes as the
// kernel reports them).
func writeRecord(dir string, objs Objects) error {
	var links []string
	for name, l := range objs.Links {
		if l != nil {
			links = append(links, name)
		}
	}
	pinned := map[string]*ebpf.Map{}
	progs := map[string]*ebpf.Program{}
	defer func() {
		for _, m := range pinned {
			m.Close()
		}
		for _, p := range progs {
			p.Close()
		}
	}()
	for name := range pinnedMapsOf(objs) {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "maps", name), nil)
		if err != nil {
			return fmt.Errorf("record pins of %s: %w", dir, err)
		}
		pinned[name] = m
	}
	for name, p := range objs.Programs {
		if p == nil {
			continue
		}
		prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, "progs", name), nil)
		if err != nil {
			return fmt.Errorf("record pins of %s: %w", dir, err)
		}
		progs[name] = prog
	}
	ids, err := mapIDs(pinned)
	if err != nil {
		return fmt.Errorf("record pins of %s: %w", dir, err)
	}
	d, err := pinDigest(pinned, ids, progs, links)
	if err != nil {
		return fmt.Errorf("record pins of %s: %w", dir, err)
	}
	if err := os.Mkdir(filepath.Join(dir, recordPrefix+d), 0o700); err != nil {
		return fmt.Errorf("record pins of %s: %w", dir, err)
	}
	return nil
}

// checkRecord fails unless maps (opened from dir's pins by name, with
// their ids), progs (the same) and the pinned link names are what dir's
// record says was pinned there.
func checkRecord(dir string, maps map[string]*ebpf.Map, ids map[string]ebpf.MapID, progs map[string]*ebpf.Program, links []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pins of %s: %w", dir, err)
	}
	var recorded []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), recordPrefix) {
			recorded = append(recorded, strings.TrimPrefix(e.Name(), recordPrefix))
		}
	}
	if len(recorded) != 1 {
		return fmt.Errorf("pins of %s: %w", dir, errNoRecord)
	}
	d, err := pinDigest(maps, ids, progs, links)
	if err != nil {
		return fmt.Errorf("pins of %s: %w", dir, err)
	}
	if d != recorded[0] {
		return fmt.Errorf("pins of %s are not the maps, programs and links that were pinned there", dir)
	}
	return nil
}

// removeRecord removes dir's record (part of unpinning dir).
func removeRecord(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing to remove; Remove reports the directory
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), recordPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

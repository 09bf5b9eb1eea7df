//go:build linux

package loader

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"

	"github.com/openoxide/oxsupervise/loader/internal/memlock"
)

// The types bpf/events.h shares with userspace; package audit/bpfring
// fills and decodes them. Every object that reports includes the same
// header, so the filesystem object's types stand for all.
type (
	EventHeader = fsOxsEventHeader
	FloodKey    = fsOxsFloodKey
	FloodBucket = fsOxsFloodBucket
)

// Source says which programs produced an event (enum oxs_source).
type Source uint32

const (
	SourceFS  Source = 1 // BPF-LSM filesystem and self-protection programs
	SourceNet Source = 2 // cgroup network programs
	// SourceROView is the read-only view's EROFS audit (bpf/roview.c).
	SourceROView Source = 3
	// Sources bounds the values above (the size of the loss counter).
	Sources = 4
)

func (s Source) String() string {
	switch s {
	case SourceFS:
		return "filesystem"
	case SourceNet:
		return "network"
	case SourceROView:
		return "read-only view"
	}
	return fmt.Sprintf("source(%d)", uint32(s))
}

// Ring buffer sizes NewEventMaps accepts, in bytes.
const (
	DefaultRingSize = 4 << 20
	MaxRingSize     = 1 << 30
)

// The names of the shared maps in every object that reports events.
const (
	eventRingMap  = "oxs_events"
	eventLostMap  = "oxs_events_lost"
	eventFloodMap = "oxs_flood"
)

// EventMaps are the maps every program reports refusals through
// (bpf/events.h). They are created once and handed to each collection that
// reports events, so that all programs share one ring buffer, one loss
// counter and one set of flood-control buckets.
type EventMaps struct {
	Ring  *ebpf.Map // records, each starting with an EventHeader
	Lost  *ebpf.Map // per CPU, indexed by Source: failed reservations
	Flood *ebpf.Map // FloodKey -> FloodBucket
	// ids are the maps' kernel ids by name when known already (read once
	// where the maps were opened from their pins).
	ids map[string]ebpf.MapID
}

// namedIDs returns the maps' kernel ids by name.
func (m *EventMaps) namedIDs() (map[string]ebpf.MapID, error) {
	if m.ids != nil {
		return m.ids, nil
	}
	return mapIDs(m.Named())
}

// NewEventMaps creates the shared maps with a ring buffer of ringSize
// bytes: a power of two, at least one page and at most MaxRingSize.
func NewEventMaps(ringSize int) (*EventMaps, error) {
	memlock.Raise()
	page := os.Getpagesize()
	if ringSize < page || ringSize > MaxRingSize || ringSize&(ringSize-1) != 0 {
		return nil, fmt.Errorf("event ring buffer size %d: want a power of two between %d and %d bytes", ringSize, page, MaxRingSize)
	}
	spec, err := eventMapSpecs()
	if err != nil {
		return nil, fmt.Errorf("load event map specs: %w", err)
	}
	create := func(name string, maxEntries uint32) (*ebpf.Map, error) {
		ms, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("event map %s missing from the network object", name)
		}
		ms = ms.Copy()
		if maxEntries != 0 {
			ms.MaxEntries = maxEntries
		}
		m, err := ebpf.NewMap(ms)
		if err != nil {
			return nil, fmt.Errorf("create event map %s: %w", name, memlock.WithoutHint(err))
		}
		return m, nil
	}
	m := &EventMaps{}
	if m.Ring, err = create(eventRingMap, uint32(ringSize)); err == nil {
		if m.Lost, err = create(eventLostMap, 0); err == nil {
			m.Flood, err = create(eventFloodMap, 0)
		}
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// share makes spec's programs use m instead of maps of their own.
func (m *EventMaps) share(spec *ebpf.CollectionSpec) (map[string]*ebpf.Map, error) {
	if m == nil {
		return nil, errors.New("no shared event maps")
	}
	ring, ok := spec.Maps[eventRingMap]
	if !ok {
		return nil, fmt.Errorf("object has no %s map", eventRingMap)
	}
	// The size is the one thing userspace chooses.
	ring.MaxEntries = m.Ring.MaxEntries()
	return map[string]*ebpf.Map{eventRingMap: m.Ring, eventLostMap: m.Lost, eventFloodMap: m.Flood}, nil
}

// IDs returns the kernel ids of the maps, to pin them with what uses them.
func (m *EventMaps) IDs() ([]ebpf.MapID, error) {
	var ids []ebpf.MapID
	for _, mm := range []*ebpf.Map{m.Ring, m.Lost, m.Flood} {
		info, err := mm.Info()
		if err != nil {
			return nil, fmt.Errorf("event map info: %w", err)
		}
		id, ok := info.ID()
		if !ok {
			return nil, errors.New("event map info: the kernel gives no map id")
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Close releases this process's references; programs still using the maps
// keep them alive.
func (m *EventMaps) Close() error {
	var errs []error
	for _, mm := range []*ebpf.Map{m.Ring, m.Lost, m.Flood} {
		if mm != nil {
			errs = append(errs, mm.Close())
		}
	}
	return errors.Join(errs...)
}

// eventMapSpecs is an object that declares the shared event maps like
// every other one does: the read-only view's, the smallest of those (its
// ELF parses in a fifth of the network object's time, and a start that
// reopens pinned maps parses it for nothing else). Every object's
// declaration is checked against the maps again when it is loaded with
// them (share, cilium/ebpf's MapReplacements).
func eventMapSpecs() (*ebpf.CollectionSpec, error) { return loadRoview() }

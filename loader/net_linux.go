//go:build linux

package loader

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/openoxide/oxsupervise/loader/internal/memlock"
)

// The network object (bpf/net.c, bpf/net.h): package egress owns its maps
// and attaches its programs; the loader loads it and names its types.
type (
	// NetObjects are the network object's programs and maps, loaded.
	NetObjects     = netObjects
	NetSession     = netNetSession
	NetAllowKey    = netNetAllowKey
	NetAllowVal    = netNetAllowVal
	NetPortRange   = netNetPortRange
	NetLocalKey    = netNetLocalKey
	NetListenerKey = netNetListenerKey
)

// LoadNetPrograms loads the network programs (bpf/net.c) into objs,
// reporting through events.
func LoadNetPrograms(objs *NetObjects, events *EventMaps) error {
	memlock.Raise()
	spec, err := loadNet()
	if err != nil {
		return fmt.Errorf("load network program spec: %w", err)
	}
	shared, err := events.share(spec)
	if err != nil {
		return fmt.Errorf("load network programs: %w", err)
	}
	return memlock.WithoutHint(spec.LoadAndAssign(objs, &ebpf.CollectionOptions{MapReplacements: shared}))
}

// NamedMaps returns the network object's maps by their names in the
// object, for pinning them (package host).
func (o *NetObjects) NamedMaps() map[string]*ebpf.Map { return TaggedMaps(&o.netMaps) }

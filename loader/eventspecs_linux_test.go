//go:build linux

package loader

import (
	"testing"

	"github.com/cilium/ebpf"
)

// The shared event maps are created (NewEventMaps) and reopened
// (OpenPinnedEventMaps) after one object's declaration, eventMapSpecs';
// every object that reports through them declares them alike.
func TestEventMapsDeclaredAlike(t *testing.T) {
	want, err := eventMapSpecs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		load func() (*ebpf.CollectionSpec, error)
	}{
		{"net", loadNet}, {"fs", loadFs}, {"self", loadSelf}, {"netfamily", loadNetfamily}, {"roview", loadRoview},
	} {
		spec, err := tt.load()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for _, name := range []string{eventRingMap, eventLostMap, eventFloodMap} {
			w, g := want.Maps[name], spec.Maps[name]
			if w == nil || g == nil {
				t.Errorf("%s: map %s declared by eventMapSpecs %v, by the object %v", tt.name, name, w != nil, g != nil)
				continue
			}
			if w.Type != g.Type || w.KeySize != g.KeySize || w.ValueSize != g.ValueSize || w.MaxEntries != g.MaxEntries || w.Flags != g.Flags {
				t.Errorf("%s: map %s is %v, eventMapSpecs declares %v", tt.name, name, g, w)
			}
		}
	}
}

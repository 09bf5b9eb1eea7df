//go:build linux

package session

import "github.com/openoxide/oxsupervise/loader"

// Objects are the layer's links and maps, the shared event maps included:
// what package host pins so that the layer's rules outlive this process.
func (l *FSLayer) Objects() loader.Objects { return withEvents(l.guard.Objects(), l.ev.ring.Maps()) }

// Objects are the layer's links and maps, the shared event maps included:
// what package host pins so that the layer's rules outlive this process.
func (l *NetworkLayer) Objects() loader.Objects { return withEvents(l.enf.Objects(), l.ev.ring.Maps()) }

func withEvents(objs loader.Objects, events *loader.EventMaps) loader.Objects {
	for name, m := range events.Named() {
		objs.Maps[name] = m
	}
	return objs
}

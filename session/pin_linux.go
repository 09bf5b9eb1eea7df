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

// Objects are the layer's program, unattached, and its maps: what package
// host pins so that the next supervisor opens them instead of loading and
// verifying them again (the program is attached only while a session is
// applied, by whoever holds it).
func (l *ROViewLayer) Objects() loader.Objects { return loader.ROViewPinObjects(&l.objs) }

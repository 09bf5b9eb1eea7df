//go:build linux

package fsguard

import (
	"fmt"

	"github.com/openoxide/oxsupervise/loader"
)

// DebugMaps describes the map contents, for failing tests.
func (g *Guard) DebugMaps() string {
	var out string
	var k uint64
	var s loader.FSSession
	it := g.progs.Sessions.Iterate()
	for it.Next(&k, &s) {
		out += fmt.Sprintf("session %d: %+v\n", k, s)
	}
	var nk loader.FSNameKey
	var nb loader.FSNameBits
	it = g.progs.Names.Iterate()
	for it.Next(&nk, &nb) {
		out += fmt.Sprintf("name %d %q: %x\n", nk.CgroupId, cString(nk.Name[:]), nb.Bits)
	}
	if m := g.progs.Debug; m != nil {
		for i := uint32(0); i < 8; i++ {
			var v uint64
			m.Lookup(i, &v)
			out += fmt.Sprintf("dbg[%d]=%#x\n", i, v)
		}
	}
	return out
}

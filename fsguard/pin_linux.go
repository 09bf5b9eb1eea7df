//go:build linux

package fsguard

import "github.com/openoxide/oxsupervise/loader"

// Objects are the programs' links and maps, for pinning them (package
// host): pinned, they keep enforcing every session in their maps after
// this process is gone.
func (g *Guard) Objects() loader.Objects { return g.progs.Objects() }

// LoadPinned is Load for programs an earlier process pinned at dir
// (loader.PinAt of Objects), reporting through events: they are opened
// from their pins instead of loaded, verified and attached again.
func LoadPinned(events *loader.EventMaps, dir string) (*Guard, error) {
	progs, err := loader.LoadPinnedFS(events, dir)
	if err != nil {
		return nil, err
	}
	return newGuard(progs)
}

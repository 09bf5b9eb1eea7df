//go:build linux

package fsguard

import "github.com/openoxide/oxsupervise/loader"

// Objects are the programs' links and maps, for pinning them (package
// host): pinned, they keep enforcing every session in their maps after
// this process is gone.
func (g *Guard) Objects() loader.Objects { return g.progs.Objects() }

//go:build linux

package egress

import (
	"github.com/cilium/ebpf/link"

	"github.com/openoxide/oxsupervise/loader"
)

// Objects are the programs' links (by program name) and maps, the shared
// event maps included, for pinning them (package host): pinned, they keep
// enforcing every session in their maps after this process is gone.
func (e *Enforcer) Objects() loader.Objects {
	e.mu.Lock()
	defer e.mu.Unlock()
	objs := loader.Objects{Links: map[string]link.Link{}, Maps: e.objs.NamedMaps()}
	for i, l := range e.links {
		objs.Links[e.linkNames[i]] = l
	}
	return objs
}

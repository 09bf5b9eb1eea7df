//go:build linux

package host

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/planner"
)

// DefaultPinDir is the root of the hierarchy the host pins in (see the
// package comment).
const DefaultPinDir = "/sys/fs/bpf/oxsupervise"

// ErrNotPinning is the pin error of a host opened without Options.Pins.
var ErrNotPinning = errors.New("this supervisor does not pin")

// Pinning is how a host keeps its objects beyond its own process.
type Pinning interface {
	// Prepare makes the pin directory ready; an error means nothing is
	// pinned (the layers still work, in this process only).
	Prepare() error
	// Pin pins the objects of one layer just built.
	Pin(layer string, objs loader.Objects) (Pinned, error)
}

// Pinned is one layer's pinned generation, and the generations earlier
// processes left of the same set (oldest first), which keep enforcing
// until their owner retires them.
type Pinned struct {
	Layer      string
	Set        loader.PinSet
	Generation loader.Generation
	Old        []loader.Generation
}

// SetName is the directory of layer's objects below a pin directory.
func SetName(layer string) string {
	if layer == planner.LayerBPFLSM {
		return "fs"
	}
	return "net"
}

// Generations pins every build of a layer as a new generation of its set:
// Dir/<set>/gen-N (see loader.PinSet). It is the daemon's: each start
// loads afresh, adopts its sessions into the new generation and then
// retires the old ones.
type Generations struct{ Dir string }

// Prepare implements Pinning.
func (g Generations) Prepare() error { return loader.EnsurePinDir(g.Dir) }

// Pin implements Pinning.
func (g Generations) Pin(layer string, objs loader.Objects) (Pinned, error) {
	set := loader.PinSet{Dir: filepath.Join(g.Dir, SetName(layer))}
	old, err := set.Generations()
	if err != nil {
		return Pinned{}, err
	}
	if len(objs.Links) == 0 {
		return Pinned{}, errors.New("the layer holds no BPF link of its own to pin")
	}
	gen, err := set.Pin(objs)
	if err != nil {
		return Pinned{}, err
	}
	return Pinned{Layer: layer, Set: set, Generation: gen, Old: old}, nil
}

// pinnable is a layer that lists its objects.
type pinnable interface{ Objects() loader.Objects }

// pin pins l's objects when the host pins; a failure leaves the layer
// working unpinned, and is kept for PinFailed.
func (h *Host) pin(opts Options, layer string, l pinnable) {
	if h.pinErr != nil {
		return
	}
	p, err := opts.Pins.Pin(layer, l.Objects())
	if err != nil {
		h.pinFailed[layer] = fmt.Errorf("pin the %s layer: %w", layer, err)
		return
	}
	h.pins[layer] = p
}

// PinErr is why the host pins nothing (ErrNotPinning without Options.Pins).
func (h *Host) PinErr() error { return h.pinErr }

// Pins returns layer's pinned generation, if it was pinned.
func (h *Host) Pins(layer string) (Pinned, bool) {
	p, ok := h.pins[layer]
	return p, ok
}

// PinFailed is why layer, built, is not pinned (nil when it is, or when
// the host pins nothing: see PinErr).
func (h *Host) PinFailed(layer string) error { return h.pinFailed[layer] }

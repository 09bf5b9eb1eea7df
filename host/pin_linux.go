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

// Pinning is how a host keeps its objects beyond its own process, and
// whether it opens them again from their pins.
type Pinning interface {
	// Prepare makes the pin directory ready for a host whose ring buffer
	// has ringSize bytes; an error means nothing is pinned (the layers
	// still work, in this process only).
	Prepare(ringSize int) error
	// Events returns the event maps pinned earlier to read again, or nil
	// to have new ones created (then passed to PinEvents).
	Events() (*loader.EventMaps, error)
	PinEvents(events *loader.EventMaps) error
	// Reusable returns the directory of layer's objects pinned earlier,
	// attached on the parent cgroup of id parent and reporting through
	// Events, to open instead of loading them; "" when there is none.
	Reusable(layer string, parent uint64) string
	// Discard removes what Reusable returned when it did not open.
	Discard(layer string, parent uint64) error
	// Pin pins the objects of one layer just built.
	Pin(layer string, parent uint64, objs loader.Objects) (Pinned, error)
	// Release ends this host's hold on the pins; they stay.
	Release() error
}

// Pinned is one layer's pinned generation, and the generations earlier
// processes left of the same set (oldest first), which keep enforcing
// until their owner retires them.
type Pinned struct {
	Layer string
	// Reused is set when the layer was opened from these pins rather
	// than loaded.
	Reused     bool
	Set        loader.PinSet
	Generation loader.Generation
	Old        []loader.Generation
}

// SetName is the directory of layer's objects below a pin directory.
func SetName(layer string) string {
	switch layer {
	case planner.LayerBPFLSM:
		return "fs"
	case planner.LayerReadOnlyViewAudit:
		return "roview"
	}
	return "net"
}

// keepsPrograms is a Pinning that also pins a layer's unattached programs
// for the next host to open (Cache); a generation (Generations) holds only
// what stays attached and confines without its owner.
type keepsPrograms interface{ keepsPrograms() }

// Generations pins every build of a layer as a new generation of its set:
// Dir/<set>/gen-N (see loader.PinSet). It is the daemon's: each start
// loads afresh, adopts its sessions into the new generation and then
// retires the old ones.
type Generations struct{ Dir string }

// Prepare implements Pinning.
func (g Generations) Prepare(int) error { return loader.EnsurePinDir(g.Dir) }

// Events implements Pinning: every generation has new event maps, pinned
// with each layer's objects.
func (Generations) Events() (*loader.EventMaps, error) { return nil, nil }

// PinEvents implements Pinning.
func (Generations) PinEvents(*loader.EventMaps) error { return nil }

// Reusable implements Pinning: a generation is never reopened.
func (Generations) Reusable(string, uint64) string { return "" }

// Discard implements Pinning.
func (Generations) Discard(string, uint64) error { return nil }

// Release implements Pinning.
func (Generations) Release() error { return nil }

// Pin implements Pinning.
func (g Generations) Pin(layer string, _ uint64, objs loader.Objects) (Pinned, error) {
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
func (h *Host) pin(opts Options, layer string, parent uint64, l pinnable) {
	h.mu.Lock()
	pinErr := h.pinErr
	h.mu.Unlock()
	if pinErr != nil {
		return
	}
	p, err := opts.Pins.Pin(layer, parent, l.Objects())
	h.mu.Lock()
	defer h.mu.Unlock()
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

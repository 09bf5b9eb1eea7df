//go:build linux

package loader

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
)

// The types bpf/fs.h shares with userspace; package fsguard fills and
// decodes them.
type (
	FSSession   = fsFsSession
	FSAnchorKey = fsFsAnchorKey
	FSRule      = fsFsRule
	FSNameKey   = fsFsNameKey
	FSNameBits  = fsFsNameBits
	FSEvent     = fsFsEvent
	FSGlob      = fsFsGlob
)

// FSPrograms are the filesystem BPF-LSM programs (bpf/fs.c), loaded and
// attached once for every session; the maps say which sessions exist and
// what each may do.
type FSPrograms struct {
	Sessions   *ebpf.Map // cgroup id -> FSSession
	Anchors    *ebpf.Map // FSAnchorKey -> FSRule
	Names      *ebpf.Map // FSNameKey -> FSNameBits
	GlobScopes *ebpf.Map // FSAnchorKey -> bitmask of FSSession.Globs

	// Attached names the LSM hooks attached.
	Attached []string
	// Skipped maps optional hooks this kernel lacks to why, for doctor.
	Skipped map[string]string

	coll  *ebpf.Collection
	links []link.Link
	// linkNames are the links' programs, in order.
	linkNames []string
	// pinnedMaps are the maps of programs opened from their pins
	// (LoadPinnedFS), which have no collection.
	pinnedMaps map[string]*ebpf.Map
}

// variants lists programs of which exactly one is loaded, chosen by the
// number of parameters the kernel's hook has: hooks whose signature
// changed between kernels.
var fsVariants = map[string]map[int]string{
	"inode_setattr": {2: "fs_inode_setattr", 3: "fs_inode_setattr_idmap"},
}

// fsOptional are programs for hooks newer kernels added; where a hook is
// missing, another hook covers the operation (see bpf/fs.c).
var fsOptional = map[string]string{
	"file_truncate": "fs_file_truncate", // 6.2+; path_truncate covers ftruncate before
}

// LoadFS loads the filesystem programs, reporting refusals (FSEvent)
// through events, and attaches every one of them. It fails, leaving
// nothing loaded, when any program does not load or attach: a partial set
// would leave ways to change files unguarded.
func LoadFS(events *EventMaps) (*FSPrograms, error) {
	raiseMemlock()
	if err := fsKernelFeatures(); err != nil {
		return nil, err
	}
	spec, kernel, skipped, err := fsSpec()
	if err != nil {
		return nil, err
	}
	shared, err := events.share(spec)
	if err != nil {
		return nil, fmt.Errorf("load filesystem programs: %w", err)
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernel}, MapReplacements: shared,
	})
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("load filesystem programs: %w\n%+v", err, verr)
		}
		return nil, fmt.Errorf("load filesystem programs: %w", err)
	}
	p := &FSPrograms{
		Sessions:   coll.Maps["fs_sessions"],
		Anchors:    coll.Maps["fs_anchors"],
		Names:      coll.Maps["fs_names"],
		GlobScopes: coll.Maps["fs_glob_scopes"],
		Skipped:    skipped,
		coll:       coll,
	}
	names := make([]string, 0, len(coll.Programs))
	for name := range coll.Programs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l, err := link.AttachLSM(link.LSMOptions{Program: coll.Programs[name]})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attach %s to its LSM hook %s: %w", name, spec.Programs[name].AttachTo, err)
		}
		p.links = append(p.links, l)
		p.linkNames = append(p.linkNames, name)
		p.Attached = append(p.Attached, spec.Programs[name].AttachTo)
	}
	return p, nil
}

// fsSpec is the filesystem object with exactly the programs this kernel
// takes: one variant of each hook whose signature changed, none for hooks
// it lacks (named in skipped).
func fsSpec() (*ebpf.CollectionSpec, *btf.Spec, map[string]string, error) {
	spec, err := loadFs()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load filesystem program spec: %w", err)
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read kernel BTF: %w", err)
	}
	for hook, byArgs := range fsVariants {
		n, err := lsmHookParams(kernel, hook)
		if err != nil {
			return nil, nil, nil, err
		}
		keep, ok := byArgs[n]
		if !ok {
			return nil, nil, nil, fmt.Errorf("LSM hook %s has %d parameters on this kernel; no program handles that signature", hook, n)
		}
		for _, name := range byArgs {
			if name != keep {
				delete(spec.Programs, name)
			}
		}
	}

	skipped := map[string]string{}
	for hook, prog := range fsOptional {
		if _, err := lsmHookParams(kernel, hook); err != nil {
			delete(spec.Programs, prog)
			skipped[hook] = fmt.Sprintf("not on this kernel (%v); covered by another hook", err)
		}
	}

	return spec, kernel, skipped, nil
}

// fsKernelFeatures names the first kernel feature the programs need that
// this kernel lacks, so the error says what to upgrade instead of quoting
// the verifier.
func fsKernelFeatures() error {
	if err := features.HaveMapType(ebpf.RingBuf); err != nil {
		return fmt.Errorf("filesystem programs need BPF ring buffers (Linux 5.8): %w", err)
	}
	for _, h := range []struct {
		fn   asm.BuiltinFunc
		what string
	}{
		{asm.FnLoop, "bpf_loop (Linux 5.17)"},
		{asm.FnGetCurrentCgroupId, "bpf_get_current_cgroup_id"},
		{asm.FnRingbufReserve, "bpf_ringbuf_reserve (Linux 5.8)"},
	} {
		// Probed as a kprobe: cilium/ebpf has no probe for LSM programs,
		// and these helpers are offered to every tracing program type
		// alike (bpf_base_func_proto, bpf_tracing_func_proto).
		if err := features.HaveProgramHelper(ebpf.Kprobe, h.fn); err != nil {
			return fmt.Errorf("filesystem programs need the helper %s: %w", h.what, err)
		}
	}
	return nil
}

// lsmHookParams counts the parameters of LSM hook name in the kernel BTF
// (bpf_lsm_<hook> is the function BPF-LSM programs attach to).
func lsmHookParams(kernel *btf.Spec, hook string) (int, error) {
	var fn *btf.Func
	if err := kernel.TypeByName("bpf_lsm_"+hook, &fn); err != nil {
		return 0, fmt.Errorf("find LSM hook %s in kernel BTF: %w", hook, err)
	}
	proto, ok := fn.Type.(*btf.FuncProto)
	if !ok {
		return 0, fmt.Errorf("LSM hook %s: BTF type %T is not a function prototype", hook, fn.Type)
	}
	return len(proto.Params), nil
}

// Close detaches and unloads everything; the rules stop applying.
func (p *FSPrograms) Close() error {
	var errs []error
	for _, l := range p.links {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	p.links = nil
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	for _, m := range p.pinnedMaps {
		m.Close()
	}
	p.pinnedMaps = nil
	return errors.Join(errs...)
}

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

	"github.com/openoxide/oxsupervise/loader/internal/memlock"
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

// FSPrograms are the BPF-LSM programs: the filesystem ones (bpf/fs.c),
// self-protection (bpf/self.c), the network policy's socket families
// (bpf/netfamily.c) and abstract AF_UNIX peers (bpf/unix.c), loaded and
// attached once for every session; the maps say which sessions exist and
// what each may do.
type FSPrograms struct {
	Sessions   *ebpf.Map // cgroup id -> FSSession, shared by every object
	Anchors    *ebpf.Map // FSAnchorKey -> FSRule
	Names      *ebpf.Map // FSNameKey -> FSNameBits
	GlobScopes *ebpf.Map // FSAnchorKey -> bitmask of FSSession.Globs

	// Attached names the LSM hooks attached.
	Attached []string
	// Skipped maps optional hooks this kernel lacks to why, for doctor.
	Skipped map[string]string

	colls []*ebpf.Collection
	links []link.Link
	// linkNames are the links' programs, in order.
	linkNames []string
	// pinnedMaps are the maps of programs opened from their pins
	// (LoadPinnedFS), by their pin names; such programs have no
	// collections.
	pinnedMaps map[string]*ebpf.Map
}

// lsmObjects are the BPF-LSM objects, in load order. The first creates
// the session map (fsSessionsMap, bpf/session.h) that the others are
// given instead of their own.
var lsmObjects = []struct {
	what      string // for errors: "load <what> programs"
	pinPrefix string // for the object's own maps among the pins (Objects)
	load      func() (*ebpf.CollectionSpec, error)
}{
	{"filesystem", "", loadFs},
	{"self-protection", "self_", loadSelf},
	{"socket family", "netfamily_", loadNetfamily},
	{"abstract unix socket", "unix_", loadUnix},
}

const fsSessionsMap = "fs_sessions"

// fsVariants lists programs of which exactly one is loaded, chosen by the
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

// LoadFS loads the BPF-LSM programs, reporting refusals (FSEvent) through
// events, and attaches every one of them. It fails, leaving nothing
// loaded, when any program does not load or attach: a partial set would
// leave ways to change files or leave the session unguarded.
func LoadFS(events *EventMaps) (*FSPrograms, error) {
	memlock.Raise()
	if err := fsKernelFeatures(); err != nil {
		return nil, err
	}
	specs, kernel, skipped, err := lsmSpecs()
	if err != nil {
		return nil, err
	}
	p := &FSPrograms{Skipped: skipped}
	type prog struct {
		name string
		prog *ebpf.Program
		hook string
	}
	var progs []prog
	for i, spec := range specs {
		coll, err := loadLSMObject(lsmObjects[i].what, spec, kernel, events, p.Sessions)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.colls = append(p.colls, coll)
		if i == 0 {
			p.Sessions = coll.Maps[fsSessionsMap]
			p.Anchors = coll.Maps["fs_anchors"]
			p.Names = coll.Maps["fs_names"]
			p.GlobScopes = coll.Maps["fs_glob_scopes"]
		}
		for name, pr := range coll.Programs {
			progs = append(progs, prog{name, pr, spec.Programs[name].AttachTo})
		}
	}
	sort.Slice(progs, func(i, j int) bool { return progs[i].name < progs[j].name })
	for _, pr := range progs {
		l, err := link.AttachLSM(link.LSMOptions{Program: pr.prog})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attach %s to its LSM hook %s: %w", pr.name, pr.hook, err)
		}
		p.links = append(p.links, l)
		p.linkNames = append(p.linkNames, pr.name)
		p.Attached = append(p.Attached, pr.hook)
	}
	return p, nil
}

// loadLSMObject loads one BPF-LSM object with the shared event maps and,
// when sessions is not nil, the session map of the first object.
func loadLSMObject(what string, spec *ebpf.CollectionSpec, kernel *btf.Spec, events *EventMaps, sessions *ebpf.Map) (*ebpf.Collection, error) {
	shared, err := events.share(spec)
	if err != nil {
		return nil, fmt.Errorf("load %s programs: %w", what, err)
	}
	if sessions != nil {
		shared[fsSessionsMap] = sessions
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernel}, MapReplacements: shared,
	})
	err = memlock.WithoutHint(err)
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("load %s programs: %w\n%+v", what, err, verr)
		}
		return nil, fmt.Errorf("load %s programs: %w", what, err)
	}
	return coll, nil
}

// lsmSpecs are the BPF-LSM objects (lsmObjects) with exactly the programs
// this kernel takes: one variant of each hook whose signature changed,
// none for hooks it lacks (named in skipped).
func lsmSpecs() ([]*ebpf.CollectionSpec, *btf.Spec, map[string]string, error) {
	var specs []*ebpf.CollectionSpec
	for _, o := range lsmObjects {
		spec, err := o.load()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("load %s program spec: %w", o.what, err)
		}
		specs = append(specs, spec)
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read kernel BTF: %w", err)
	}
	// The variants and optional hooks are all filesystem programs.
	fs := specs[0]
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
				delete(fs.Programs, name)
			}
		}
	}

	skipped := map[string]string{}
	for hook, prog := range fsOptional {
		if _, err := lsmHookParams(kernel, hook); err != nil {
			delete(fs.Programs, prog)
			skipped[hook] = fmt.Sprintf("not on this kernel (%v); covered by another hook", err)
		}
	}

	return specs, kernel, skipped, nil
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
	for _, c := range p.colls {
		c.Close()
	}
	p.colls = nil
	for _, m := range p.pinnedMaps {
		m.Close()
	}
	p.pinnedMaps = nil
	return errors.Join(errs...)
}

package planner

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

var (
	errNoKernel = errors.New("kernel lacks it")
	errNoLoad   = &NotLoaded{Err: errors.New("the filesystem programs did not load: EPERM")}
)

// machine is one combination of capabilities, named for failure messages.
type machine struct {
	name string
	caps Capabilities
}

func landlockCaps(abi int, audits bool) Capabilities {
	return Capabilities{LandlockABI: abi, LandlockAudits: audits}
}

// machines is every combination of the capability values Decide reads.
func machines() []machine {
	type opt struct {
		name string
		set  func(*Capabilities)
	}
	dims := [][]opt{
		{{"cgroup2", func(*Capabilities) {}}, {"no-cgroup2", func(c *Capabilities) { c.Cgroup2 = errNoKernel }}},
		{{"mountns", func(*Capabilities) {}}, {"no-mountns", func(c *Capabilities) { c.MountNS = ErrForced }}},
		{
			{"landlock7", func(c *Capabilities) { c.LandlockABI, c.LandlockAudits = 7, true }},
			{"landlock5", func(c *Capabilities) { c.LandlockABI = 5 }},
			{"no-landlock", func(c *Capabilities) { c.Landlock = errNoKernel }},
		},
		{
			{"bpflsm", func(*Capabilities) {}},
			{"no-bpflsm", func(c *Capabilities) { c.BPFLSM = errNoKernel }},
			{"bpflsm-not-loaded", func(c *Capabilities) { c.BPFLSM = errNoLoad }},
		},
		{{"cgroup-net", func(*Capabilities) {}}, {"no-cgroup-net", func(c *Capabilities) { c.Network = errNoKernel }}},
		{{"netns", func(*Capabilities) {}}, {"no-netns", func(c *Capabilities) { c.NetNS = ErrForced }}},
		{{"roview-audit", func(*Capabilities) {}}, {"no-roview-audit", func(c *Capabilities) { c.ReadOnlyViewAudit = errNoKernel }}},
	}
	out := []machine{{}}
	for _, d := range dims {
		var next []machine
		for _, m := range out {
			for _, o := range d {
				c := m.caps
				o.set(&c)
				next = append(next, machine{name: strings.TrimPrefix(m.name+"/"+o.name, "/"), caps: c})
			}
		}
		out = next
	}
	return out
}

// policies are the shapes of policy Decide tells apart.
func policies() map[string]*policy.Compiled {
	ws := []policy.Anchor{{Path: "/ws", Exists: true}}
	return map[string]*policy.Compiled{
		"workspace-write/net-none": {Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: ws,
			Network: policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone}},
		"workspace-write/net-none/loopback-all/protected": {Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: ws,
			ProtectedPatterns: []policy.ProtectedPattern{{}}, Network: policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackAll}},
		"workspace-write/allowlist": {Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: ws,
			Network: policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackSession}},
		"workspace-write/net-unset": {Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: ws},
		"read-only/full-net/loopback-none": {Mode: policy.ModeReadOnly, FilesystemRules: true,
			Network: policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone}},
		"external-sandbox/full-net": {Mode: policy.ModeExternalSandbox,
			Network: policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackAll}},
		"full-access": {Mode: policy.ModeFullAccess,
			Network: policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackAll}},
	}
}

// TestDecideEveryCombination decides every policy shape on every machine
// for both verbs and checks what must hold of each plan: the boundary is
// never weaker than the policy asks (a needed layer is there or the
// session is refused naming it), nothing is planned that the machine
// lacks, and every missing layer is said.
func TestDecideEveryCombination(t *testing.T) {
	n := 0
	for _, m := range machines() {
		for pname, c := range policies() {
			for _, verb := range []Verb{Run, Attach} {
				for _, opts := range []Options{{}, {NetworkOnly: true}} {
					n++
					name := fmt.Sprintf("%s %s on %s (%+v)", verb, pname, m.name, opts)
					p, err := Decide(verb, c, m.caps, opts)
					p2, err2 := Decide(verb, c, m.caps, opts)
					if !reflect.DeepEqual(p, p2) || fmt.Sprint(err) != fmt.Sprint(err2) {
						t.Errorf("%s: two decisions differ", name)
					}
					checkPlan(t, name, verb, c, m.caps, opts, p, err)
					if verb == Run {
						// NetworkOnly is attach's: run decides the same without it.
						p0, err0 := Decide(verb, c, m.caps, Options{})
						if !reflect.DeepEqual(p, p0) || fmt.Sprint(err) != fmt.Sprint(err0) {
							t.Errorf("%s: the options changed run's plan", name)
						}
					}
				}
			}
		}
	}
	if want := 2 * 2 * 3 * 3 * 2 * 2 * 2 * len(policies()) * 2 * 2; n != want {
		t.Fatalf("decided %d combinations, want %d", n, want)
	}
}

func checkPlan(t *testing.T, name string, verb Verb, c *policy.Compiled, caps Capabilities, opts Options, p *Plan, err error) {
	t.Helper()
	needNet := !(c.Network.Policy == policy.NetFull && c.Network.Loopback == policy.LoopbackAll)
	// attach without BPF-LSM cannot hold filesystem rules: refused
	// unless the caller asked for the network-only boundary by name.
	attachNoFS := verb == Attach && c.FilesystemRules && caps.BPFLSM != nil
	if err != nil {
		var be *BoundaryError
		if !errors.As(err, &be) {
			t.Errorf("%s: error %v is not a *BoundaryError", name, err)
			return
		}
		// The refusal names a layer the machine lacks.
		lacking := map[string]error{LayerCgroup: caps.Cgroup2, LayerMountNS: caps.MountNS, LayerLandlock: caps.Landlock,
			LayerNetwork: caps.Network, LayerNetNS: caps.NetNS}
		if attachNoFS && !opts.NetworkOnly {
			lacking[LayerBPFLSM] = caps.BPFLSM
		}
		if why, ok := lacking[be.Layer]; !ok || why == nil {
			t.Errorf("%s: refused naming %s, which the machine has: %v", name, be.Layer, err)
		}
		var nofs *AttachNeedsBPFLSM
		if be.Layer == LayerBPFLSM && verb == Attach && (!errors.As(err, &nofs) || !errors.Is(err, caps.BPFLSM) ||
			!strings.Contains(err.Error(), NetworkOnlyFlag) || strings.Contains(err.Error(), caps.BPFLSM.Error()) && !errors.As(caps.BPFLSM, new(*NotLoaded))) {
			t.Errorf("%s: the refusal does not name %s, keep the reason for the remedy, or shows the kernel's words: %v", name, NetworkOnlyFlag, err)
		}
		return
	}
	if attachNoFS && !opts.NetworkOnly && caps.Cgroup2 == nil {
		t.Errorf("%s: attach planned without BPF-LSM for filesystem rules, not asked for network only: %+v", name, p)
	}
	if caps.Cgroup2 != nil {
		t.Errorf("%s: planned without cgroup v2", name)
	}
	if p.BPFLSM && (caps.BPFLSM != nil || !c.FilesystemRules) {
		t.Errorf("%s: BPF-LSM planned (policy has filesystem rules: %v; machine: %v)", name, c.FilesystemRules, caps.BPFLSM)
	}
	if p.ReadOnlyViewAudit && (caps.ReadOnlyViewAudit != nil || !p.ReadOnlyView) {
		t.Errorf("%s: read-only view audit planned (view: %v; machine: %v)", name, p.ReadOnlyView, caps.ReadOnlyViewAudit)
	}
	if p.ReadOnlyView && !p.ReadOnlyViewAudit && !hasWarning(p, "EROFS refusals are not audited") {
		t.Errorf("%s: the read-only view's refusals are unaudited without a warning: %q", name, p.Warnings)
	}
	if p.Network && (caps.Network != nil || !needNet) {
		t.Errorf("%s: network layer planned (needed: %v; machine: %v)", name, needNet, caps.Network)
	}
	var nl *NotLoaded
	if c.FilesystemRules && errors.As(caps.BPFLSM, &nl) && !hasWarning(p, "BPF-LSM is usable but") {
		t.Errorf("%s: BPF-LSM did not load and the plan does not say so: %q", name, p.Warnings)
	}
	switch verb {
	case Attach:
		if p.MountNS || p.NetNS || p.Landlock != Absent || p.Seccomp {
			t.Errorf("%s: attach planned a layer a running process cannot enter: %+v", name, p)
		}
		if p.KernelAudit {
			t.Errorf("%s: attach follows the kernel audit feed, which none of its layers reports to: %+v", name, p)
		}
		if c.FilesystemRules && !p.BPFLSM && (!opts.NetworkOnly || !hasWarning(p, "does NOT enforce the policy's filesystem rules")) {
			t.Errorf("%s: filesystem rules unenforced without a warning: %q", name, p.Warnings)
		}
		if needNet && c.Network.Policy != policy.NetFull && !p.Network {
			t.Errorf("%s: network policy %q with no network layer", name, c.Network.Policy)
		}
	case Run:
		if !p.MountNS || caps.MountNS != nil {
			t.Errorf("%s: run without its mount namespace, or with one the machine lacks", name)
		}
		// seccomp (always) and Landlock at the audit ABI report their
		// refusals only to the kernel audit feed.
		if !p.Seccomp || !p.KernelAudit {
			t.Errorf("%s: run without its seccomp filter or without following the kernel audit feed: %+v", name, p)
		}
		// BPF-LSM refuses (and audits) connect(2) to a pathname socket
		// outside the writable roots; Landlock has no right for it.
		unixWarned := hasWarning(p, "pathname unix sockets outside writable roots are NOT blocked")
		if want := c.Mode != policy.ModeFullAccess && !p.BPFLSM; unixWarned != want {
			t.Errorf("%s: pathname unix socket warning %v, want %v (bpf-lsm %v): %q", name, unixWarned, want, p.BPFLSM, p.Warnings)
		}
		if c.FilesystemRules && !p.BPFLSM && p.Landlock != Required {
			t.Errorf("%s: filesystem rules with no filesystem layer: %+v", name, p)
		}
		if p.Landlock != Absent && (caps.Landlock != nil || p.LandlockABI != caps.LandlockABI) {
			t.Errorf("%s: landlock planned as %v with ABI %d on a machine with %v ABI %d", name, p.Landlock, p.LandlockABI, caps.Landlock, caps.LandlockABI)
		}
		if p.Landlock == Optional && (!p.BPFLSM || p.LandlockFallback == "") {
			t.Errorf("%s: optional landlock without BPF-LSM under it or without its fallback warning", name)
		}
		if p.BPFLSM && caps.Landlock == nil && !caps.LandlockAudits && (p.Landlock != Absent || !hasWarning(p, "cannot report refusals to audit")) {
			t.Errorf("%s: landlock below the audit ABI stacked on BPF-LSM, or not said: %+v", name, p)
		}
		// BPF-LSM judges AF_UNIX peers, pathname and abstract; without it
		// the plan says which connections are not blocked.
		if want := c.Mode != policy.ModeFullAccess && !p.BPFLSM; hasWarning(p, "unix sockets") != want {
			t.Errorf("%s: unix socket warning %v, want %v (bpf-lsm %v): %q", name, !want, want, p.BPFLSM, p.Warnings)
		}
		switch {
		case !needNet:
			if p.Network || p.NetNS {
				t.Errorf("%s: full network got network layers", name)
			}
		case p.Network:
			if p.NetNS {
				t.Errorf("%s: both the network layer and the namespace fallback", name)
			}
		case c.Network.Policy == policy.NetFull:
			if p.NetNS || !hasWarning(p, "is NOT enforced") {
				t.Errorf("%s: loopback rules unenforced without a warning, or a namespace for full network: %+v", name, p)
			}
		default: // none, or unset
			if !p.NetNS || caps.NetNS != nil || !hasWarning(p, "empty network namespace instead") {
				t.Errorf("%s: network none without the network layer and without the said namespace fallback: %+v", name, p)
			}
			if p.LoopbackUp != (c.Network.Loopback != policy.LoopbackNone) {
				t.Errorf("%s: loopback up %v for loopback %q", name, p.LoopbackUp, c.Network.Loopback)
			}
		}
	}
}

func hasWarning(p *Plan, s string) bool {
	for _, w := range p.Warnings {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// TestDecide pins the exact plans of the combinations that matter most.
func TestDecide(t *testing.T) {
	pol := policies()
	full := landlockCaps(7, true)
	lsmLess := full
	lsmLess.BPFLSM = errNoKernel
	thisMachine := lsmLess // Landlock ABI 7, BPF-LSM refused, cgroup BPF loads
	noNet := thisMachine
	noNet.Network = errNoKernel
	noTracer := thisMachine
	noTracer.ReadOnlyViewAudit = errNoKernel
	tests := []struct {
		name    string
		verb    Verb
		policy  string
		caps    Capabilities
		want    Plan
		wantErr string // the refused layer
		opts    Options
	}{
		{"bpf-lsm with landlock stacked", Run, "workspace-write/net-none", full,
			Plan{Verb: Run, BPFLSM: true, Landlock: Optional, LandlockABI: 7, LandlockFallback: "landlock not stacked on BPF-LSM: %v", MountNS: true, Seccomp: true, KernelAudit: true, Network: true}, "", Options{}},
		{"landlock alone", Run, "workspace-write/net-none", thisMachine,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, ReadOnlyViewAudit: true, SeccompSockets: true, Network: true}, "", Options{}},
		{"net none falls back to a namespace", Run, "workspace-write/net-none", noNet,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, ReadOnlyViewAudit: true, SeccompSockets: true, NetNS: true}, "", Options{}},
		{"unset net is none, loopback up", Run, "workspace-write/net-unset", noNet,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, ReadOnlyViewAudit: true, SeccompSockets: true, NetNS: true, LoopbackUp: true}, "", Options{}},
		{"read-only view without its audit tracer", Run, "workspace-write/net-none", noTracer,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, SeccompSockets: true, Network: true}, "", Options{}},
		{"allowlist refused without the network layer", Run, "workspace-write/allowlist", noNet, Plan{}, LayerNetwork, Options{}},
		{"full-access needs no BPF", Run, "full-access", noNet,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true}, "", Options{}},
		{"no filesystem layer at all", Run, "workspace-write/net-none", Capabilities{Landlock: errNoKernel, BPFLSM: errNoKernel}, Plan{}, LayerLandlock, Options{}},
		{"attach with BPF-LSM", Attach, "workspace-write/allowlist", full,
			Plan{Verb: Attach, BPFLSM: true, Network: true}, "", Options{}},
		{"attach filesystem rules refused without BPF-LSM", Attach, "workspace-write/allowlist", thisMachine, Plan{}, LayerBPFLSM, Options{}},
		{"attach read-only refused without BPF-LSM", Attach, "read-only/full-net/loopback-none", thisMachine, Plan{}, LayerBPFLSM, Options{}},
		{"attach network-only with the network layer", Attach, "workspace-write/allowlist", thisMachine,
			Plan{Verb: Attach, Network: true}, "", Options{NetworkOnly: true}},
		{"attach network-only allowlist refused without it", Attach, "workspace-write/allowlist", noNet, Plan{}, LayerNetwork, Options{NetworkOnly: true}},
		{"attach full network needs nothing", Attach, "external-sandbox/full-net", noNet, Plan{Verb: Attach}, "", Options{}},
		{"attach full-access needs no BPF-LSM", Attach, "full-access", thisMachine, Plan{Verb: Attach}, "", Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decide(tt.verb, pol[tt.policy], tt.caps, tt.opts)
			if tt.wantErr != "" {
				var be *BoundaryError
				if !errors.As(err, &be) || be.Layer != tt.wantErr {
					t.Fatalf("got %+v, %v; want a refusal naming %s", p, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p.Warnings = nil // checked by TestDecideEveryCombination
			if !reflect.DeepEqual(*p, tt.want) {
				t.Errorf("plan\n got %+v\nwant %+v", *p, tt.want)
			}
		})
	}
}

func TestWants(t *testing.T) {
	pol := policies()
	for name, want := range map[string]Want{
		"workspace-write/net-none":         {BPFLSM: true, Network: true, ReadOnlyViewAudit: true},
		"read-only/full-net/loopback-none": {BPFLSM: true, Network: true, ReadOnlyViewAudit: true},
		"external-sandbox/full-net":        {},
		"full-access":                      {},
	} {
		if got := Wants(pol[name]); got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
}

func TestForce(t *testing.T) {
	caps := landlockCaps(7, true).Force(ParseUnavailable(" landlock, network ,"))
	if caps.Landlock != ErrForced || caps.Network != ErrForced || caps.LandlockAudits || caps.BPFLSM != nil || caps.Cgroup2 != nil {
		t.Errorf("forced: %+v", caps)
	}
}

// TestAttachRefusalWords: the refusal of an attach without BPF-LSM says
// what is missing and the flag that accepts the weaker boundary, keeps
// the loader's reason for the remedy (errors.Is) and does not show it.
func TestAttachRefusalWords(t *testing.T) {
	loaderErr := fmt.Errorf("bpf-lsm probe: load BPF_LSM_MAC program on file_open: %w",
		errors.New("load program: operation not permitted (MEMLOCK may be too low, consider rlimit.RemoveMemlock)"))
	notForPolicy := &NotLoaded{Err: errors.New("not for this policy: anchor /ws is on overlayfs")}
	for _, tc := range []struct {
		name       string
		why        error
		want, dont []string
	}{
		{"kernel lacks it", loaderErr,
			[]string{"mode workspace-write", "need BPF-LSM", "not usable on this machine", NetworkOnlyFlag, "NOT enforced"},
			[]string{"RemoveMemlock", "BPF_LSM_MAC", "probe"}},
		{"not loaded for this policy", notForPolicy,
			[]string{"usable here but not for this policy: anchor /ws is on overlayfs", NetworkOnlyFlag},
			[]string{"not usable on this machine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := landlockCaps(7, true)
			caps.BPFLSM = tc.why
			_, err := Decide(Attach, policies()["workspace-write/net-none"], caps, Options{})
			var be *BoundaryError
			var nofs *AttachNeedsBPFLSM
			if !errors.As(err, &be) || be.Layer != LayerBPFLSM || !errors.As(err, &nofs) || !errors.Is(err, tc.why) {
				t.Fatalf("got %v, want a bpf-lsm refusal wrapping %v", err, tc.why)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q lacks %q", err, w)
				}
			}
			for _, d := range tc.dont {
				if strings.Contains(err.Error(), d) {
					t.Errorf("refusal %q shows %q", err, d)
				}
			}
		})
	}
}

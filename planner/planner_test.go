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
				n++
				name := fmt.Sprintf("%s %s on %s", verb, pname, m.name)
				p, err := Decide(verb, c, m.caps)
				p2, err2 := Decide(verb, c, m.caps)
				if !reflect.DeepEqual(p, p2) || fmt.Sprint(err) != fmt.Sprint(err2) {
					t.Errorf("%s: two decisions differ", name)
				}
				checkPlan(t, name, verb, c, m.caps, p, err)
			}
		}
	}
	if want := 2 * 2 * 3 * 3 * 2 * 2 * 2 * len(policies()) * 2; n != want {
		t.Fatalf("decided %d combinations, want %d", n, want)
	}
}

func checkPlan(t *testing.T, name string, verb Verb, c *policy.Compiled, caps Capabilities, p *Plan, err error) {
	t.Helper()
	needNet := !(c.Network.Policy == policy.NetFull && c.Network.Loopback == policy.LoopbackAll)
	if err != nil {
		var be *BoundaryError
		if !errors.As(err, &be) {
			t.Errorf("%s: error %v is not a *BoundaryError", name, err)
			return
		}
		// The refusal names a layer the machine lacks.
		lacking := map[string]error{LayerCgroup: caps.Cgroup2, LayerMountNS: caps.MountNS, LayerLandlock: caps.Landlock,
			LayerNetwork: caps.Network, LayerNetNS: caps.NetNS}
		if why, ok := lacking[be.Layer]; !ok || why == nil {
			t.Errorf("%s: refused naming %s, which the machine has: %v", name, be.Layer, err)
		}
		return
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
		if c.FilesystemRules && !p.BPFLSM && !hasWarning(p, "does NOT enforce the policy's filesystem rules") {
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
	}{
		{"bpf-lsm with landlock stacked", Run, "workspace-write/net-none", full,
			Plan{Verb: Run, BPFLSM: true, Landlock: Optional, LandlockABI: 7, LandlockFallback: "landlock not stacked on BPF-LSM: %v", MountNS: true, Seccomp: true, KernelAudit: true, Network: true}, ""},
		{"landlock alone", Run, "workspace-write/net-none", thisMachine,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, ReadOnlyViewAudit: true, SeccompSockets: true, Network: true}, ""},
		{"net none falls back to a namespace", Run, "workspace-write/net-none", noNet,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, ReadOnlyViewAudit: true, SeccompSockets: true, NetNS: true}, ""},
		{"unset net is none, loopback up", Run, "workspace-write/net-unset", noNet,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, ReadOnlyViewAudit: true, SeccompSockets: true, NetNS: true, LoopbackUp: true}, ""},
		{"read-only view without its audit tracer", Run, "workspace-write/net-none", noTracer,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true, ReadOnlyView: true, SeccompSockets: true, Network: true}, ""},
		{"allowlist refused without the network layer", Run, "workspace-write/allowlist", noNet, Plan{}, LayerNetwork},
		{"full-access needs no BPF", Run, "full-access", noNet,
			Plan{Verb: Run, Landlock: Required, LandlockABI: 7, MountNS: true, Seccomp: true, KernelAudit: true}, ""},
		{"no filesystem layer at all", Run, "workspace-write/net-none", Capabilities{Landlock: errNoKernel, BPFLSM: errNoKernel}, Plan{}, LayerLandlock},
		{"attach with the network layer", Attach, "workspace-write/allowlist", thisMachine,
			Plan{Verb: Attach, Network: true}, ""},
		{"attach allowlist refused without it", Attach, "workspace-write/allowlist", noNet, Plan{}, LayerNetwork},
		{"attach full network needs nothing", Attach, "external-sandbox/full-net", noNet, Plan{Verb: Attach}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decide(tt.verb, pol[tt.policy], tt.caps)
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

// Package doctor finds out which of oxsupervise's enforcement layers this
// machine can build — BPF-LSM or Landlock for files, cgroup BPF for the
// network, kernel audit — and which sandbox modes follow from that. `run`
// reuses Run to decide its layers; `oxsupervise doctor` prints the Report.
//
// The JSON form of Report is a stable interface (schema_version 1): fields
// are only ever added. Every probe records "ok" plus, on failure, "error"
// (the full message) and "errno" (the symbolic errno, e.g. "EPERM", when the
// kernel refused with one).
package doctor

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/openoxide/oxsupervise/agent"
	"github.com/openoxide/oxsupervise/internal/rcu"
	"github.com/openoxide/oxsupervise/quarantine"
)

// SchemaVersion is the version of the JSON form of Report.
const SchemaVersion = 1

// Probe is the outcome of one attempt to use a kernel feature.
type Probe struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Errno string `json:"errno,omitempty"`
	// Step says which step failed, in the prober's words (e.g. "lsm list",
	// "load BPF_LSM_MAC program on file_open").
	Step string `json:"step,omitempty"`
}

// Report is everything doctor found. Field names are part of the JSON
// contract.
type Report struct {
	SchemaVersion int    `json:"schema_version"`
	OS            string `json:"os"`
	// Root is false when doctor ran unprivileged: most probes then fail for
	// that reason alone.
	Root bool `json:"root"`

	Kernel struct {
		Release string `json:"release"` // uname -r
		Version string `json:"version"` // uname -v
		Error   string `json:"error,omitempty"`
		// RCU is how the kernel runs RCU grace periods (package rcu),
		// which a nested session's launcher move and a standalone run's
		// attach of the read-only view audit may wait for; null when
		// the knobs could not be read (RCUError says why).
		RCU      *rcu.Settings `json:"rcu"`
		RCUError string        `json:"rcu_error,omitempty"`
	} `json:"kernel"`

	LSM struct {
		Active   []string `json:"active"` // stacking order, from /sys/kernel/security/lsm
		Lockdown string   `json:"lockdown,omitempty"`
		Error    string   `json:"error,omitempty"` // the list could not be read
	} `json:"lsm"`

	// BPFLSM: "bpf" in the LSM list and a BPF_LSM_MAC program loads and attaches.
	BPFLSM Probe `json:"bpf_lsm"`

	Landlock struct {
		Probe
		ABI int `json:"abi"` // 0 when unavailable
	} `json:"landlock"`

	Cgroup struct {
		Probe
		Layout string `json:"layout"` // unified | hybrid | legacy | none
		Mount  string `json:"mount,omitempty"`
		// Controllers are those cgroup2 has (root cgroup.controllers);
		// Enabled those its root hands to children (cgroup.subtree_control).
		Controllers []string `json:"controllers"`
		Enabled     []string `json:"enabled"`
		// Kill and Freeze: cgroup.kill (5.14+) and cgroup.freeze (5.2+) exist
		// in a non-root group, measured on the probe group; null when no
		// probe group could be created.
		Kill   *bool `json:"kill"`
		Freeze *bool `json:"freeze"`
		// FavorDynmods: the hierarchy is mounted with favordynmods, so a
		// process moving between groups does not wait for an RCU grace
		// period (cgroup_threadgroup_rwsem); null when there is no cgroup2.
		FavorDynmods *bool `json:"favordynmods"`
		// Migration is what moving a process between groups costs here
		// (cgroup.ProbeMigration), which the mount options alone do not
		// tell; null when there is no cgroup2.
		Migration *Migration `json:"migration"`
	} `json:"cgroup2"`

	BTF Probe `json:"btf"`

	// CgroupSockAddr: a cgroup/connect4 program attaches to a temporary
	// child group that doctor creates and removes.
	CgroupSockAddr Probe `json:"cgroup_sock_addr"`

	Audit struct {
		Probe
		Enabled    uint32 `json:"enabled"`     // 0 off, 1 on, 2 locked
		Failure    uint32 `json:"failure"`     // action on failure: 0 silent, 1 printk, 2 panic
		DaemonPID  uint32 `json:"daemon_pid"`  // 0: no auditd, records go to the kernel log
		Backlog    uint32 `json:"backlog"`     // records waiting
		Lost       uint32 `json:"lost"`        // records lost since boot
		RateLimit  uint32 `json:"rate_limit"`  // messages per second, 0 = unlimited
		BacklogMax uint32 `json:"backlog_max"` // backlog_limit
	} `json:"audit"`

	// Launcher is the session launcher this oxsupervise starts its
	// sessions with (session.launcherCommand): the launcher program
	// installed beside it (Path), or, with none installed, itself
	// re-executed (OK, Path empty: every session's start pays the whole
	// supervisor's start-up twice). A launcher program that fails its
	// check is an error (Error set): run refuses every session (exit 125),
	// and the verdict fails.
	Launcher struct {
		Probe
		Path string `json:"path,omitempty"`
	} `json:"launcher"`

	Layers  []Layer `json:"layers"`
	Modes   []Mode  `json:"modes"`
	Verdict Verdict `json:"verdict"`

	// Machine and Remedies (remedy.go): the distribution and boot
	// configuration doctor read, and the exact change for each layer
	// missing for a reason the kernel command line can fix.
	Machine  *Machine `json:"machine,omitempty"`
	Remedies []Remedy `json:"remedies,omitempty"`
	// Agents are the coding agents found in PATH, with whether their
	// built-in profile was checked against the installed version. They
	// do not change the verdict.
	Agents []agent.Installed `json:"agents"`
}

// Layer names; stable strings in JSON.
const (
	LayerBPFLSM        = "bpf-lsm"        // filesystem rules through BPF-LSM
	LayerLandlock      = "landlock"       // filesystem rules through Landlock
	LayerCgroupNetwork = "cgroup-network" // network rules through cgroup BPF
	LayerAudit         = "audit"          // kernel audit (Landlock and seccomp denial records)
)

// LandlockMinCompleteABI is the first Landlock ABI that controls truncate:
// below it a process can truncate files it may not write.
const LandlockMinCompleteABI = 3

// Layer is one enforcement layer and whether it can be built here.
type Layer struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"` // filesystem | network | audit
	Available bool   `json:"available"`
	// Partial: usable but not complete (e.g. Landlock below ABI 3).
	Partial bool   `json:"partial,omitempty"`
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"` // what to do when not (fully) available
}

// Mode says whether a sandbox mode can be enforced here.
type Mode struct {
	Name        string   `json:"name"`
	Enforceable bool     `json:"enforceable"`
	Layers      []string `json:"layers,omitempty"` // the layers that would enforce it
	Note        string   `json:"note,omitempty"`
}

// Verdict sums the report up.
type Verdict struct {
	// OK: a complete filesystem layer and the network layer are available
	// (doctor exits 0).
	OK         bool   `json:"ok"`
	Filesystem string `json:"filesystem,omitempty"` // the layer run would use: bpf-lsm or landlock
	Attach     bool   `json:"attach"`               // attach can apply filesystem rules (needs bpf-lsm)
	Summary    string `json:"summary"`
	// ProtectedNames states what happens to a protected name (.claude/,
	// .envrc, a new repository's .git/hooks) a session creates here.
	ProtectedNames string `json:"protected_names,omitempty"`
	// Limits are what the layers here cannot hold and what replaces them
	// (limits.go).
	Limits []Limit `json:"limits,omitempty"`
}

// decide fills Layers, Modes and Verdict from the probes.
func (r *Report) decide() {
	r.Layers = []Layer{r.bpfLSMLayer(), r.landlockLayer(), r.networkLayer(), r.auditLayer()}
	bpf, ll, net := r.Layers[0], r.Layers[1], r.Layers[2]

	switch {
	case bpf.Available:
		r.Verdict.Filesystem = LayerBPFLSM
	case ll.Available && !ll.Partial:
		r.Verdict.Filesystem = LayerLandlock
	}
	fs := r.Verdict.Filesystem
	r.Verdict.Attach = bpf.Available
	r.Verdict.OK = fs != "" && net.Available && r.Launcher.Error == ""

	fsLayers := []string{}
	if bpf.Available {
		fsLayers = append(fsLayers, LayerBPFLSM)
	}
	if ll.Available && !ll.Partial {
		fsLayers = append(fsLayers, LayerLandlock)
	}
	confined := func(name string) Mode {
		m := Mode{Name: name, Enforceable: fs != "" && net.Available}
		if m.Enforceable {
			m.Layers = append(append(m.Layers, fsLayers...), LayerCgroupNetwork)
			if !bpf.Available {
				m.Note = "run only: attach needs bpf-lsm for filesystem rules"
			}
			return m
		}
		var missing []string
		if fs == "" {
			missing = append(missing, "no complete filesystem layer (bpf-lsm or landlock ABI >= 3)")
		}
		if !net.Available {
			missing = append(missing, "no cgroup network layer (needed unless the policy allows full network)")
		}
		m.Note = strings.Join(missing, "; ")
		return m
	}
	ext := Mode{Name: "external-sandbox", Enforceable: net.Available}
	if net.Available {
		ext.Layers = []string{LayerCgroupNetwork}
		ext.Note = "no filesystem rules by design; network from policy"
	} else {
		ext.Note = "only with network = full: no cgroup network layer"
	}
	r.Modes = []Mode{
		confined("read-only"),
		confined("workspace-write"),
		ext,
		{Name: "full-access", Enforceable: true, Note: "no restrictions by design"},
	}

	switch {
	case bpf.Available:
		r.Verdict.ProtectedNames = "refused by the kernel when a session creates one (bpf-lsm)"
	case fs == LayerLandlock:
		r.Verdict.ProtectedNames = fmt.Sprintf("NOT refused without bpf-lsm: each one a session creates is moved to %s/<session> "+
			"within milliseconds of its creation (audited), and none is left in place when the session ends; "+
			"a policy with sandbox.require = [\"bpf-lsm\"] refuses to run here (fix: %s)", quarantine.DefaultDir, bpf.Fix)
	}
	r.Verdict.Limits = r.limits(bpf) // limits.go
	switch {
	case r.Verdict.OK && bpf.Available:
		r.Verdict.Summary = "every confined mode can be enforced, for run and attach"
	case r.Verdict.OK:
		r.Verdict.Summary = "every confined mode can be enforced by run (filesystem through landlock); attach refuses policies with filesystem rules until bpf-lsm is usable (--network-only: network rules only)"
	default:
		var missing []string
		if fs == "" {
			missing = append(missing, "a complete filesystem layer")
		}
		if !net.Available {
			missing = append(missing, "the network layer")
		}
		if r.Launcher.Error != "" {
			missing = append(missing, "a usable session launcher")
		}
		r.Verdict.Summary = "sandboxed runs would be refused: missing " + strings.Join(missing, " and ")
	}
}

func (r *Report) bpfLSMLayer() Layer {
	l := Layer{Name: LayerBPFLSM, Kind: "filesystem", Available: r.BPFLSM.OK}
	if l.Available {
		l.Detail = "BPF_LSM_MAC probe loaded and attached"
		return l
	}
	l.Detail = r.BPFLSM.Error
	bpfListed := false
	for _, name := range r.LSM.Active {
		bpfListed = bpfListed || name == "bpf"
	}
	switch {
	case !r.Root:
		l.Fix = "run doctor as root: loading BPF programs needs CAP_BPF and CAP_SYS_ADMIN"
	case r.LSM.Error == "" && !bpfListed:
		l.Fix = fmt.Sprintf("add bpf to lsm= on the kernel command line: lsm=%s (needs CONFIG_BPF_LSM=y) and reboot",
			strings.Join(append(append([]string{}, r.LSM.Active...), "bpf"), ","))
	case r.LSM.Error != "":
		l.Fix = "make /sys/kernel/security/lsm readable (mount securityfs) and check that bpf is in lsm= on the kernel command line"
	case r.BPFLSM.Errno == "EPERM":
		l.Fix = "bpf is in the LSM list but the kernel refuses BPF_LSM_MAC programs with EPERM: check kernel lockdown" +
			lockdownHint(r.LSM.Lockdown) + ", and any hypervisor or seccomp policy that filters bpf()"
		if r.Landlock.OK {
			l.Fix += "; landlock stays run's filesystem layer meanwhile"
		}
	default:
		l.Fix = "the BPF-LSM probe failed (see detail); kernel needs CONFIG_BPF_LSM=y, BTF and bpf in lsm="
	}
	return l
}

func lockdownHint(lockdown string) string {
	if lockdown == "" {
		return ""
	}
	return " (/sys/kernel/security/lockdown: " + lockdown + ")"
}

func (r *Report) landlockLayer() Layer {
	l := Layer{Name: LayerLandlock, Kind: "filesystem", Available: r.Landlock.OK && r.Landlock.ABI > 0}
	switch {
	case l.Available && r.Landlock.ABI >= LandlockMinCompleteABI:
		l.Detail = fmt.Sprintf("ABI %d", r.Landlock.ABI)
	case l.Available:
		l.Partial = true
		l.Detail = fmt.Sprintf("ABI %d: cannot control truncate (needs ABI %d, Linux 6.2+)", r.Landlock.ABI, LandlockMinCompleteABI)
		l.Fix = "upgrade to Linux 6.2 or later for a complete Landlock filesystem layer"
	case r.Landlock.Errno == "EOPNOTSUPP":
		l.Detail = r.Landlock.Error
		l.Fix = fmt.Sprintf("Landlock is built in but not enabled: add landlock to lsm= on the kernel command line: lsm=%s",
			strings.Join(append(append([]string{}, r.LSM.Active...), "landlock"), ","))
	case r.Landlock.Errno == "ENOSYS":
		l.Detail = r.Landlock.Error
		l.Fix = "the kernel has no Landlock (needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK=y)"
	default:
		l.Detail = r.Landlock.Error
		l.Fix = "Landlock probe failed (see detail)"
	}
	return l
}

func (r *Report) networkLayer() Layer {
	l := Layer{Name: LayerCgroupNetwork, Kind: "network", Available: r.Cgroup.OK && r.CgroupSockAddr.OK}
	switch {
	case l.Available:
		l.Detail = "cgroup/connect4 attached to a probe group under " + r.Cgroup.Mount
	case !r.Cgroup.OK:
		l.Detail = r.Cgroup.Error
		l.Fix = "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup, or boot with systemd.unified_cgroup_hierarchy=1)"
	case !r.Root:
		l.Detail = r.CgroupSockAddr.Error
		l.Fix = "run doctor as root: the probe creates a cgroup and loads a BPF program"
	default:
		l.Detail = r.CgroupSockAddr.Error
		l.Fix = "the kernel needs CONFIG_CGROUP_BPF=y and must allow cgroup sock_addr programs"
	}
	return l
}

func (r *Report) auditLayer() Layer {
	l := Layer{Name: LayerAudit, Kind: "audit", Available: r.Audit.OK}
	switch {
	case l.Available:
		l.Partial = r.Audit.Enabled == 0
		dest := "kernel log (no auditd)"
		if r.Audit.DaemonPID != 0 {
			dest = fmt.Sprintf("auditd pid %d", r.Audit.DaemonPID)
		}
		l.Detail = fmt.Sprintf("enabled=%d, records to %s, lost=%d", r.Audit.Enabled, dest, r.Audit.Lost)
		if r.Audit.Enabled == 0 {
			l.Fix = "kernel audit is off (audit=0 or auditctl -e 0): Landlock and seccomp denial records will not be emitted; enable with auditctl -e 1"
		}
	case r.Audit.Errno == "EPROTONOSUPPORT":
		l.Detail = r.Audit.Error
		l.Fix = "the kernel has no audit support (CONFIG_AUDIT); oxsupervise's own audit log still records BPF and resolver denials"
	case !r.Root:
		l.Detail = r.Audit.Error
		l.Fix = "run doctor as root: reading the audit status needs CAP_AUDIT_CONTROL"
	default:
		l.Detail = r.Audit.Error
		l.Fix = "kernel audit is unreachable (it only answers in the initial network namespace); Landlock and seccomp denials will not reach the audit log"
	}
	return l
}

// WriteText prints the report for people: one check per line, aligned, then
// the layers, the modes and the verdict.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(name, status, detail string) { fmt.Fprintf(tw, "%s\t%s\t%s\n", name, status, detail) }
	probe := func(name string, p Probe, okDetail string) {
		if p.OK {
			line(name, "ok", okDetail)
			return
		}
		detail := p.Error
		if p.Errno != "" && !strings.Contains(detail, p.Errno) {
			detail += " (" + p.Errno + ")"
		}
		line(name, "FAIL", detail)
	}

	if !r.Root {
		line("privileges", "WARN", "not running as root: probes that need privileges fail for that reason")
	}
	if r.Kernel.Error != "" {
		line("kernel", "FAIL", r.Kernel.Error)
	} else {
		line("kernel", "ok", r.Kernel.Release+" "+r.Kernel.Version)
	}
	if r.LSM.Error != "" {
		line("lsm", "FAIL", "cannot read the active LSMs: "+r.LSM.Error)
	} else {
		line("lsm", "ok", strings.Join(r.LSM.Active, ","))
	}
	probe("bpf-lsm", r.BPFLSM, "bpf in the LSM list; BPF_LSM_MAC probe loaded and attached")
	probe("landlock", r.Landlock.Probe, fmt.Sprintf("ABI %d", r.Landlock.ABI))
	probe("cgroup2", r.Cgroup.Probe, fmt.Sprintf("%s (%s layout)", r.Cgroup.Mount, r.Cgroup.Layout))
	if r.Cgroup.OK {
		line("cgroup2 controllers", "info", fmt.Sprintf("available: %s; enabled for children: %s",
			orNone(r.Cgroup.Controllers), orNone(r.Cgroup.Enabled)))
		line("cgroup2 kill/freeze", "info", fmt.Sprintf("cgroup.kill %s, cgroup.freeze %s", yesNo(r.Cgroup.Kill), yesNo(r.Cgroup.Freeze)))
		if r.Cgroup.FavorDynmods != nil {
			line("cgroup2 favordynmods", "info", favorDynmodsLine(*r.Cgroup.FavorDynmods, r.Cgroup.Migration, r.Cgroup.Mount, r.Kernel.RCU != nil && r.Kernel.RCU.Expedited()))
		}
	}
	if r.Kernel.RCU != nil {
		line("rcu grace periods", "info", rcuLine(*r.Kernel.RCU))
	}
	probe("btf", r.BTF, "kernel BTF loads")
	probe("cgroup sock_addr", r.CgroupSockAddr, "connect4 program attached to a probe group")
	probe("audit", r.Audit.Probe, fmt.Sprintf("status readable, enabled=%d", r.Audit.Enabled))
	switch {
	case r.Launcher.Error == "" && r.Launcher.Path == "":
		line("launcher", "WARN", "no oxsupervise-launch installed beside oxsupervise: sessions re-execute oxsupervise as their launcher (the same boundary, a slower start); make build or make install puts it there")
	default:
		probe("launcher", r.Launcher.Probe, r.Launcher.Path)
	}

	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "layer\tstatus\tdetail")
	for _, l := range r.Layers {
		status := "available"
		switch {
		case l.Partial:
			status = "partial"
		case !l.Available:
			status = "MISSING"
		}
		line(l.Name+" ("+l.Kind+")", status, l.Detail)
		if l.Fix != "" {
			line("", "", "fix: "+l.Fix)
		}
	}

	if err := tw.Flush(); err != nil {
		return err
	}
	r.writeRemedies(w) // remedy.go

	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "mode\tstatus\tdetail")
	for _, m := range r.Modes {
		status, detail := "enforceable", strings.Join(m.Layers, " + ")
		if !m.Enforceable {
			status = "NO"
		}
		if m.Note != "" {
			if detail != "" {
				detail += "; "
			}
			detail += m.Note
		}
		line(m.Name, status, detail)
	}
	fmt.Fprintln(tw)
	verdict := "FAIL"
	if r.Verdict.OK {
		verdict = "OK"
	}
	line("verdict", verdict, r.Verdict.Summary)
	if r.Verdict.ProtectedNames != "" {
		fmt.Fprintln(tw)
		line("protected names", "", r.Verdict.ProtectedNames)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeLimits(w); err != nil {
		return err
	}
	fmt.Fprintln(tw)
	if len(r.Agents) == 0 {
		line("agents", "none", "no claude, codex, opencode or aider in PATH")
	}
	for _, a := range r.Agents {
		status := "checked"
		if !a.Checked {
			status = "UNCHECKED"
		}
		detail := fmt.Sprintf("%s %s (profile %s)", a.Path, a.Version, a.Profile)
		if a.Note != "" {
			detail += "; " + a.Note
		}
		line("agent "+a.Command, status, detail)
	}
	return tw.Flush()
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "unknown (no probe group)"
	case *b:
		return "yes"
	}
	return "no"
}

// Migration is cgroup.MigrationCost as the report carries it.
type Migration struct {
	// QuietMS is a migration after a quiet spell, WarmMS one right after
	// it; WaitsForGracePeriod says the first waited for an RCU grace
	// period the second did not.
	QuietMS             float64 `json:"quiet_ms"`
	WarmMS              float64 `json:"warm_ms"`
	WaitsForGracePeriod bool    `json:"waits_for_grace_period"`
	// Error is why nothing was measured (a doctor run without root).
	Error string `json:"error,omitempty"`
}

// favorDynmodsLine says what the hierarchy's favordynmods option, and the
// migration the probe timed, mean for sessions. A nested session's
// launcher moves into its group (it cannot be cloned into it: the nested
// run has no right to that group's parent), and a move may wait for an RCU
// grace period (cgroup.MigrationCost): on the 2-CPU VM of issue 18, Linux
// 6.18, 6-11 ms on one boot and 0.01-1 ms once favordynmods had been set
// (it stays in effect until reboot there, whatever the mount options say
// later). The option is the machine's choice, not oxsupervise's: it makes
// every fork and exit on the machine a little costlier.
func favorDynmodsLine(on bool, m *Migration, mount string, expedited bool) string {
	measured := ""
	switch {
	case m == nil:
	case m.Error != "":
		measured = "; migration not timed: " + m.Error
	default:
		measured = fmt.Sprintf("; a migration took %.2f ms after a quiet spell, %.2f ms right after another", m.QuietMS, m.WarmMS)
	}
	waits := !on
	if m != nil && m.Error == "" {
		waits = m.WaitsForGracePeriod
	}
	switch {
	case !waits && on:
		return "on: a nested session's launcher moves into its group without waiting for an RCU grace period" + measured
	case !waits && expedited:
		return "off, but migrations wait for no full RCU grace period: grace periods are expedited (see rcu grace periods)" + measured
	case !waits:
		return "off, but migrations wait for no RCU grace period (the kernel locks each thread group on its own, as after favordynmods was once set)" + measured
	case on:
		return "on, yet migrations wait for an RCU grace period: each nested session's launcher may wait that long when it moves into its group" + measured
	}
	return fmt.Sprintf("off: each nested session may wait for an RCU grace period (up to ~10 ms) when its launcher moves into its group%s; `mount -o remount,favordynmods %s` removes the wait at the price of costlier fork and exit machine-wide (on Linux 6.18 it then stays in effect until reboot), and expedited grace periods (see rcu grace periods) shorten it", measured, mount)
}

// rcuLine says what the kernel's grace periods mean for sessions. Measured
// on the 2-CPU VM of issue 18 (Linux 6.18, 2026-12-04): with normal grace
// periods a nested session's own cost was 13-14 ms (its launcher's move
// waited for one) and back-to-back standalone runs took 16 ms (median;
// each attach of the read-only view audit within a grace period of the
// previous run's detach waits for it), with rcu_expedited=1 8.1-8.3 ms
// and 11.2 ms.
func rcuLine(s rcu.Settings) string {
	const (
		waits = "a nested session's launcher move (unless cgroup2 favordynmods), and a standalone run started within a grace period of the previous one's end (its attach of the read-only view audit), may each wait for a grace period (4-19 ms measured on a 2-CPU VM)"
		price = "at the price of an interrupt on every CPU for each grace period machine-wide"
	)
	switch {
	case s.Expedited():
		return "expedited (rcu_expedited=1): a nested session's launcher move and a standalone run's attach of the read-only view audit wait ~0.1 ms where a grace period is due, " + price
	case s.NormalSet:
		// rcu_normal wins over rcu_expedited: setting the latter alone
		// would change nothing.
		return "normal (rcu_normal=1, which overrides rcu_expedited): " + waits + "; `echo 0 > " + rcu.NormalPath + "` and `echo 1 > " + rcu.ExpeditedPath + "` expedite them, " + price
	}
	return "normal: " + waits + "; `echo 1 > " + rcu.ExpeditedPath + "` (rcupdate.rcu_expedited=1 at boot) expedites them, " + price
}

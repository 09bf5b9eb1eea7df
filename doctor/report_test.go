package doctor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/internal/rcu"
)

// synthetic builds a report as probes on an imagined machine would.
func synthetic(root, bpfOK bool, bpfErrno string, lsms []string, landlockABI int, landlockErrno string, netOK bool) Report {
	r := Report{SchemaVersion: SchemaVersion, OS: "linux", Root: root}
	r.LSM.Active = lsms
	r.BPFLSM = Probe{OK: bpfOK, Errno: bpfErrno}
	if !bpfOK {
		r.BPFLSM.Error = "bpf-lsm probe: failed"
	}
	r.Landlock.ABI = landlockABI
	r.Landlock.OK = landlockABI > 0
	r.Landlock.Errno = landlockErrno
	r.Cgroup.Probe = Probe{OK: true}
	r.Cgroup.Mount = "/sys/fs/cgroup"
	r.CgroupSockAddr = Probe{OK: netOK}
	r.Audit.Probe = Probe{OK: true}
	r.Audit.Enabled = 1
	r.decide()
	return r
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name         string
		report       Report
		ok           bool
		filesystem   string
		attach       bool
		fixContains  map[string]string // layer -> text its fix must contain
		unenforcable []string
	}{
		{
			name:       "everything",
			report:     synthetic(true, true, "", []string{"capability", "landlock", "bpf"}, 7, "", true),
			ok:         true,
			filesystem: LayerBPFLSM,
			attach:     true,
		},
		{
			name:        "bpf not in lsm list",
			report:      synthetic(true, false, "", []string{"lockdown", "capability", "landlock"}, 7, "", true),
			ok:          true,
			filesystem:  LayerLandlock,
			fixContains: map[string]string{LayerBPFLSM: "lsm=lockdown,capability,landlock,bpf"},
		},
		{
			name:        "bpf listed but EPERM",
			report:      synthetic(true, false, "EPERM", []string{"capability", "landlock", "bpf"}, 7, "", true),
			ok:          true,
			filesystem:  LayerLandlock,
			fixContains: map[string]string{LayerBPFLSM: "EPERM"},
		},
		{
			name:         "landlock too old and no bpf",
			report:       synthetic(true, false, "", []string{"capability", "landlock"}, 2, "", true),
			ok:           false,
			fixContains:  map[string]string{LayerLandlock: "6.2"},
			unenforcable: []string{"read-only", "workspace-write"},
		},
		{
			name:         "landlock disabled at boot",
			report:       synthetic(true, false, "", []string{"capability"}, 0, "EOPNOTSUPP", true),
			ok:           false,
			fixContains:  map[string]string{LayerLandlock: "lsm=capability,landlock"},
			unenforcable: []string{"read-only", "workspace-write"},
		},
		{
			name:         "no network layer",
			report:       synthetic(true, true, "", []string{"bpf"}, 7, "", false),
			ok:           false,
			filesystem:   LayerBPFLSM,
			attach:       true,
			unenforcable: []string{"read-only", "workspace-write", "external-sandbox"},
		},
		{
			name:         "not root",
			report:       synthetic(false, false, "EPERM", []string{"bpf"}, 7, "", false),
			ok:           false,
			filesystem:   LayerLandlock,
			fixContains:  map[string]string{LayerBPFLSM: "as root", LayerCgroupNetwork: "as root"},
			unenforcable: []string{"read-only", "workspace-write", "external-sandbox"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.report
			if r.Verdict.OK != tt.ok || r.Verdict.Filesystem != tt.filesystem || r.Verdict.Attach != tt.attach {
				t.Errorf("verdict %+v, want ok=%v filesystem=%q attach=%v", r.Verdict, tt.ok, tt.filesystem, tt.attach)
			}
			for _, l := range r.Layers {
				want, ok := tt.fixContains[l.Name]
				if ok && !strings.Contains(l.Fix, want) {
					t.Errorf("layer %s fix %q, want it to contain %q", l.Name, l.Fix, want)
				}
				if !l.Available && l.Fix == "" {
					t.Errorf("layer %s is missing but has no fix", l.Name)
				}
			}
			for _, m := range r.Modes {
				wantNo := false
				for _, name := range tt.unenforcable {
					wantNo = wantNo || name == m.Name
				}
				if m.Enforceable == wantNo {
					t.Errorf("mode %s enforceable=%v, want %v (note %q)", m.Name, m.Enforceable, !wantNo, m.Note)
				}
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			wantVerdict := "verdict  FAIL"
			if tt.ok {
				wantVerdict = "verdict  OK"
			}
			if !strings.Contains(text.String(), wantVerdict) {
				t.Errorf("text output lacks %q:\n%s", wantVerdict, text.String())
			}
		})
	}
}

// TestJSONFieldNames pins the documented JSON field names.
func TestJSONFieldNames(t *testing.T) {
	r := synthetic(true, false, "EPERM", []string{"bpf"}, 7, "", true)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"schema_version", "os", "root", "kernel", "lsm", "bpf_lsm", "landlock", "cgroup2",
		"btf", "cgroup_sock_addr", "audit", "layers", "modes", "verdict"} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON report lacks %q: %s", key, b)
		}
	}
	var probe map[string]any
	json.Unmarshal(m["bpf_lsm"], &probe)
	if probe["ok"] != false || probe["errno"] != "EPERM" {
		t.Errorf("bpf_lsm = %v, want ok=false errno=EPERM", probe)
	}
}

func TestFavorDynmodsLine(t *testing.T) {
	on, off := true, false
	waits := &Migration{QuietMS: 9.1, WarmMS: 0.2, WaitsForGracePeriod: true}
	fast := &Migration{QuietMS: 0.15, WarmMS: 0.11}
	tests := []struct {
		name      string
		favor     *bool
		migration *Migration
		rcu       *rcu.Settings
		want      string // "" when the report has no such line
		remount   bool   // the line names the remount of the hierarchy's mount
	}{
		{"on", &on, fast, nil, "cgroup2 favordynmods info on: a nested session's launcher moves into its group without waiting for an RCU grace period; a migration took 0.15 ms after a quiet spell, 0.11 ms right after another", false},
		{"off and waiting", &off, waits, nil, "cgroup2 favordynmods info off: each nested session may wait for an RCU grace period (up to ~10 ms) when its launcher moves into its group; a migration took 9.10 ms after a quiet spell, 0.20 ms right after another", true},
		{"off without a wait", &off, fast, nil, "off, but migrations wait for no RCU grace period", false},
		{"on with a wait", &on, waits, nil, "on, yet migrations wait for an RCU grace period", false},
		{"off, not timed", &off, &Migration{Error: "time a migration: permission denied"}, nil, "off: each nested session may wait for an RCU grace period (up to ~10 ms) when its launcher moves into its group; migration not timed: time a migration: permission denied", true},
		{"off, no probe", &off, nil, nil, "off: each nested session may wait for an RCU grace period", true},
		{"off without a wait, expedited", &off, fast, &rcu.Settings{ExpeditedSet: true}, "off, but migrations wait for no full RCU grace period: grace periods are expedited", false},
		{"no cgroup2", nil, nil, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := synthetic(true, true, "", []string{"bpf"}, 7, "", true)
			r.Cgroup.FavorDynmods, r.Cgroup.Migration, r.Kernel.RCU = tt.favor, tt.migration, tt.rcu
			checkInfoLine(t, r, tt.want, "favordynmods", "mount -o remount,favordynmods /sys/fs/cgroup", tt.remount)
		})
	}
}

func TestRCULine(t *testing.T) {
	tests := []struct {
		name string
		rcu  *rcu.Settings
		want string // "" when the report has no such line
		echo bool   // the line says how to expedite them
	}{
		{"normal", &rcu.Settings{}, "rcu grace periods info normal: a nested session's launcher move (unless cgroup2 favordynmods), and a standalone run started within a grace period of the previous one's end", true},
		{"expedited", &rcu.Settings{ExpeditedSet: true}, "rcu grace periods info expedited (rcu_expedited=1)", false},
		{"normal overrides", &rcu.Settings{ExpeditedSet: true, NormalSet: true}, "rcu grace periods info normal (rcu_normal=1, which overrides rcu_expedited): a nested session's launcher move", true},
		{"only normal", &rcu.Settings{NormalSet: true}, "`echo 0 > /sys/kernel/rcu_normal` and `echo 1 > /sys/kernel/rcu_expedited` expedite them", true},
		{"unreadable", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := synthetic(true, true, "", []string{"bpf"}, 7, "", true)
			r.Kernel.RCU = tt.rcu
			checkInfoLine(t, r, tt.want, "rcu grace periods", "echo 1 > /sys/kernel/rcu_expedited", tt.echo)
		})
	}
}

// checkInfoLine renders r as text and checks that it holds want, spaces
// folded (want "": that no line mentions absent), and that it names remedy
// exactly when hasRemedy.
func checkInfoLine(t *testing.T, r Report, want, absent, remedy string, hasRemedy bool) {
	t.Helper()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(b.String()), " ")
	switch want := strings.Join(strings.Fields(want), " "); {
	case want == "" && strings.Contains(text, absent):
		t.Errorf("report mentions %s without its probe:\n%s", absent, b.String())
	case want != "" && !strings.Contains(text, want):
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	if got := strings.Contains(b.String(), remedy); got != hasRemedy {
		t.Errorf("the report names %q: %v, want %v:\n%s", remedy, got, hasRemedy, b.String())
	}
}

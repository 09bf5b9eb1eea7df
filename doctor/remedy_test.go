package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/planner"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestRemediesGolden")

// reportFor is the report doctor would make on a machine whose probes
// agree with its LSM list: bpf-lsm usable iff bpf is listed, Landlock
// iff landlock is (EOPNOTSUPP otherwise, as the kernel answers when it is
// built in but not enabled), everything else available.
func reportFor(m Machine) *Report {
	r := &Report{SchemaVersion: SchemaVersion, OS: "linux", Root: true}
	r.LSM.Active = m.LSM
	r.BPFLSM = Probe{OK: slices.Contains(m.LSM, "bpf")}
	if !r.BPFLSM.OK {
		r.BPFLSM = Probe{Error: "bpf is not in the LSM list", Step: "lsm list"}
	}
	if slices.Contains(m.LSM, "landlock") {
		r.Landlock.OK, r.Landlock.ABI = true, 4
	} else {
		r.Landlock.Error, r.Landlock.Errno = "landlock_create_ruleset: operation not supported", "EOPNOTSUPP"
	}
	r.Cgroup.OK, r.Cgroup.Mount, r.CgroupSockAddr.OK, r.Audit.OK = true, "/sys/fs/cgroup", true, true
	r.decide()
	r.Machine = &m
	r.Remedies = Remedies(m, r)
	return r
}

// TestRemediesGolden reads each fixture tree under testdata/doctor (the
// files of a real installation of that distribution: os-release, the
// kernel command line, the LSM order, GRUB's defaults and drop-ins,
// systemd-boot entries) and compares the machine doctor reads, the
// remedies it prints and the limits it states with
// testdata/doctor/<distro>.golden (go test -update rewrites them).
func TestRemediesGolden(t *testing.T) {
	entries, err := os.ReadDir("../testdata/doctor")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		name, dir := e.Name(), filepath.Join("../testdata/doctor", e.Name())
		t.Run(name, func(t *testing.T) {
			r := reportFor(ReadMachine(dir))
			var got bytes.Buffer
			r.writeRemedies(&got)
			if err := r.writeLimits(&got); err != nil {
				t.Fatal(err)
			}
			enc := json.NewEncoder(&got)
			enc.SetIndent("", "  ")
			if err := enc.Encode(struct {
				Machine  *Machine `json:"machine"`
				Remedies []Remedy `json:"remedies"`
				Limits   []Limit  `json:"limits"`
			}{r.Machine, r.Remedies, r.Verdict.Limits}); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("../testdata/doctor", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./doctor -run TestRemediesGolden -update writes it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("remedies for %s differ from %s:\n%s", name, golden, got.String())
			}
		})
	}
	if n < 4 {
		t.Errorf("%d fixture trees under testdata/doctor, want at least ubuntu, debian, fedora, arch", n)
	}
}

func TestReplaceArg(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"quiet splash", "quiet splash lsm=a,bpf"},
		{"", "lsm=a,bpf"},
		{"ro lsm=selinux quiet lsm=yama", "ro quiet lsm=a,bpf"},
		{"ro nolsm=1", "ro nolsm=1 lsm=a,bpf"},
	} {
		if got := replaceArg(tc.in, "lsm", "lsm=a,bpf"); got != tc.want {
			t.Errorf("replaceArg(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestBPFLSMRemedy: the remedy a refusal for want of BPF-LSM (attach)
// shows is doctor's for the machine: the boot loader's lsm= steps where
// bpf is not in the LSM list, the layer's fix where the kernel refuses
// the programs, nothing where the host's own reason stands in the way.
func TestBPFLSMRemedy(t *testing.T) {
	debian := ReadMachine("../testdata/doctor/debian")
	notListed := &Report{Root: true}
	notListed.LSM.Active = debian.LSM
	notListed.BPFLSM = probeFrom(fmt.Errorf("bpf-lsm probe: active LSMs: %w", loader.ErrBPFNotInLSMList))
	rem := notListed.bpfLSMRemedy(debian)
	if !slices.Contains(rem.Layers, LayerBPFLSM) || len(rem.Steps) != 3 || rem.Steps[1] != "update-grub" ||
		!strings.Contains(rem.Steps[0], "lsm=lockdown,capability,landlock,yama,apparmor,bpf") {
		t.Errorf("bpf not listed on Debian: remedy %+v, want the GRUB steps", rem)
	}
	if text := rem.Format("remedy"); !strings.HasPrefix(text, "  remedy: bpf not in the active LSM order") || !strings.Contains(text, "    2. update-grub\n") {
		t.Errorf("formatted remedy %q", text)
	}

	refused := &Report{Root: true}
	refused.LSM.Active, refused.LSM.Lockdown = append(debian.LSM, "bpf"), "integrity"
	refused.BPFLSM = probeFrom(fmt.Errorf("bpf-lsm probe: load: %w", syscall.EPERM))
	rem = refused.bpfLSMRemedy(debian)
	if len(rem.Steps) != 0 || !strings.Contains(rem.Why, "refuses BPF_LSM_MAC programs with EPERM") || !strings.Contains(rem.Why, "lockdown: integrity") {
		t.Errorf("bpf listed, load refused: remedy %+v, want the layer's fix", rem)
	}

	for _, why := range []error{nil, &planner.NotLoaded{Err: errors.New("not for this policy")},
		&planner.BoundaryError{Layer: planner.LayerBPFLSM, Err: &planner.AttachNeedsBPFLSM{Why: &planner.NotLoaded{Err: errors.New("x")}}}} {
		if rem, ok := BPFLSMRemedy(why); ok {
			t.Errorf("BPFLSMRemedy(%v) = %+v: no machine change helps the host's own reason", why, rem)
		}
	}
}

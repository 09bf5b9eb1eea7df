package doctor

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
// systemd-boot entries) and compares the machine doctor reads and the
// remedies it prints with testdata/doctor/<distro>.golden (go test
// -update rewrites them).
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
			enc := json.NewEncoder(&got)
			enc.SetIndent("", "  ")
			if err := enc.Encode(struct {
				Machine  *Machine `json:"machine"`
				Remedies []Remedy `json:"remedies"`
			}{r.Machine, r.Remedies}); err != nil {
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

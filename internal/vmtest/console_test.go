package vmtest

import (
	"debug/elf"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestConsoleVerdict(t *testing.T) {
	const nonce = "n0nce"
	jobs := []Job{{Name: "a"}, {Name: "b"}}
	m := func(event string, args ...any) string { return marker(nonce, event, args...) }
	tests := []struct {
		name    string
		lines   []string
		jobs    []Job
		wantErr string // "" = pass; otherwise a substring of the error
	}{
		{"all pass", []string{m("ready", 1), m("start", "a"), "PASS", m("exit", "a", 0), m("start", "b"), m("exit", "b", 0), m("done")}, jobs, ""},
		{"one fails", []string{m("ready", 1), m("exit", "a", 0), m("exit", "b", 1), m("done")}, jobs, "b: exit status 1"},
		{"missing result", []string{m("ready", 1), m("exit", "a", 0), m("done")}, jobs, "b: no result"},
		{"silent guest", nil, jobs, "a: no result"},
		{"no done marker", []string{m("exit", "a", 0), m("exit", "b", 0)}, jobs, "did not report completion"},
		{"kernel panic", []string{m("exit", "a", 0), "[ 1.0] Kernel panic - not syncing: oops", m("exit", "b", 0), m("done")}, jobs, "panicked"},
		{"forged marker without nonce", []string{m("exit", "a", 0), markerPrefix + "other exit b 0", m("done")}, jobs, "b: no result"},
		{"marker after unterminated output", []string{m("exit", "a", 0), "PASS" + m("exit", "b", 0), m("done")}, jobs, ""},
		{"guest setup error", []string{m("error", "mount", "failed"), m("done")}, []Job{}, "guest failed: mount failed"},
		{"initramfs failure", []string{"@@oxs-vmtest initramfs failed: insmod 9p"}, []Job{}, "insmod 9p"},
		{"must-fail job passed", []string{m("exit", "a", 0), m("done")}, []Job{{Name: "a", ExpectFail: true}}, "must fail"},
		{"must-fail job failed", []string{m("exit", "a", 1), m("done")}, []Job{{Name: "a", ExpectFail: true}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res Result
			var out strings.Builder
			c := newConsole(nonce, tt.jobs, &out, &res, time.Now)
			for _, l := range tt.lines {
				c.line(l + "\r\n")
			}
			err := evaluate(tt.jobs, res)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("evaluate() = %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("evaluate() = %v, want error containing %q", err, tt.wantErr)
			}
			if strings.Contains(out.String(), markerPrefix+nonce) {
				t.Errorf("markers leaked into the output:\n%s", out.String())
			}
		})
	}
}

func TestConsoleBootTime(t *testing.T) {
	now := time.Unix(100, 0)
	clock := func() time.Time { return now }
	var res Result
	c := newConsole("x", nil, io.Discard, &res, clock)
	now = now.Add(12 * time.Second)
	c.line(marker("x", "ready", "11.5"))
	if res.BootTime != 12*time.Second {
		t.Fatalf("BootTime = %v, want 12s", res.BootTime)
	}
}

func TestDefaultLSM(t *testing.T) {
	tests := []struct {
		configLSM string
		want      string
	}{
		{"landlock,lockdown,yama,loadpin,safesetid,integrity,apparmor,selinux,smack,tomoyo,bpf", "landlock,lockdown,yama,integrity,apparmor,bpf"},
		{"lockdown,yama", "lockdown,yama,bpf"},
		{"", "landlock,lockdown,yama,integrity,apparmor,bpf"},
	}
	for _, tt := range tests {
		if got := DefaultLSM(Kernel{ConfigLSM: tt.configLSM}); got != tt.want {
			t.Errorf("DefaultLSM(%q) = %q, want %q", tt.configLSM, got, tt.want)
		}
	}
}

func TestNaturalLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-10-amd64", true},
		{"vmlinuz-6.1.0-10-amd64", "vmlinuz-6.1.0-9-amd64", false},
		{"vmlinuz-6.1.0-57-amd64", "vmlinuz-6.1.0-57-amd64", false},
		{"vmlinuz-6.1.0-57-amd64", "vmlinuz-6.1.0-57-rt-amd64", true},
		{"vmlinuz-6.1.0", "vmlinuz-6.1.0-1", true},
	}
	for _, tt := range tests {
		if got := naturalLess(tt.a, tt.b); got != tt.want {
			t.Errorf("naturalLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestCheckStaticMissingFile(t *testing.T) {
	if err := checkStatic("/nonexistent/busybox"); err == nil {
		t.Fatal("checkStatic of a missing file succeeded")
	}
}

func TestBootImageExtractsPVHVmlinux(t *testing.T) {
	k, err := FindKernel("/boot/vmlinuz-*")
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: no kernel package to extract from: %v", err)
	}
	if _, err := os.ReadFile(k.Image); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: kernel image unreadable: %v", err)
	}
	path, err := BootImage(k, t.TempDir())
	if err != nil {
		t.Fatalf("BootImage() = %v", err)
	}
	if path == k.Image {
		t.Skipf("SKIPPED, NOT PASSED: %s has no PVH entry or could not be decompressed; the VM boots the bzImage", k.Image)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("extracted kernel is not ELF: %v", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		t.Fatalf("extracted kernel machine = %v, want x86-64", f.Machine)
	}
}

package cgroup

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		fixture string
		want    Mounts
	}{
		{"mountinfo-unified", Mounts{Layout: LayoutUnified, Cgroup2: "/sys/fs/cgroup", Cgroup2Options: []string{"rw", "nsdelegate", "memory_recursiveprot"}}},
		{"mountinfo-favordynmods", Mounts{Layout: LayoutUnified, Cgroup2: "/sys/fs/cgroup", Cgroup2Options: []string{"rw", "nsdelegate", "favordynmods", "memory_recursiveprot"}}},
		{"mountinfo-hybrid", Mounts{Layout: LayoutHybrid, Cgroup2: "/sys/fs/cgroup/unified", Cgroup2Options: []string{"rw"}, V1: []V1Hierarchy{
			{"/sys/fs/cgroup/cpu", []string{"cpu"}},
			{"/sys/fs/cgroup/cpuacct", []string{"cpuacct"}},
			{"/sys/fs/cgroup/memory", []string{"memory"}},
			{"/sys/fs/cgroup/pids", []string{"pids"}},
			{"/sys/fs/cgroup/systemd", []string{"name=systemd"}},
		}}},
		{"mountinfo-legacy", Mounts{Layout: LayoutLegacy, V1: []V1Hierarchy{
			{"/sys/fs/cgroup/cpu,cpuacct", []string{"cpu", "cpuacct"}},
			{"/sys/fs/cgroup/memory", []string{"memory"}},
			{"/sys/fs/cgroup/systemd", []string{"name=systemd"}},
		}}},
		{"mountinfo-none", Mounts{Layout: LayoutNone}},
		// A container's view of a subtree is listed first; the hierarchy
		// root mount (with an escaped space) must still win.
		{"mountinfo-container", Mounts{Layout: LayoutUnified, Cgroup2: "/mnt/cgroup root", Cgroup2Options: []string{"rw"}}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ParseMountinfo(f)
			if err != nil {
				t.Fatalf("ParseMountinfo: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseMountinfo(%s)\n got %+v\nwant %+v", tt.fixture, got, tt.want)
			}
		})
	}
}

func TestParseMountinfoMalformed(t *testing.T) {
	for _, in := range []string{
		"30 22 0:26 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n", // no separator
		"30 22 / - cgroup2 cgroup2 rw\n",                      // too few fields
	} {
		if _, err := ParseMountinfo(strings.NewReader(in)); err == nil {
			t.Errorf("ParseMountinfo(%q) succeeded, want an error", in)
		} else if !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseMountinfo(%q) error %q does not name the line", in, err)
		}
	}
}

func TestValidateSessionID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"s1", true},
		{"2026-11-30T03.agent_1", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{".", false},
		{"..", false},
		{"../etc", false},
		{"a/b", false},
		{"-rf", false},
		{".hidden", false},
		{"cgroup.procs", false},
		{"a b", false},
		{"a\nb", false},
		{"é", false},
	}
	for _, tt := range tests {
		err := ValidateSessionID(tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateSessionID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "session id") {
			t.Errorf("ValidateSessionID(%q) error %q does not say what was wrong", tt.id, err)
		}
	}
}

func TestValidateParent(t *testing.T) {
	for _, p := range []string{"", "/abs", "a/../b", "a//b", "./a", ".."} {
		if validateParent(p) == nil {
			t.Errorf("validateParent(%q) accepted", p)
		}
	}
	for _, p := range []string{"oxsupervise", "system.slice/oxsupervise.service/sessions"} {
		if err := validateParent(p); err != nil {
			t.Errorf("validateParent(%q): %v", p, err)
		}
	}
}

package procfs

import (
	"os"
	"reflect"
	"runtime"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     Stat
		err      bool
	}{
		{"plain", "42 (bash) S 7 42 42 0 -1 4194560 100 0", Stat{Comm: "bash", State: 'S', PPID: 7, Flags: 4194560}, false},
		{"comm with ) and spaces", "42 (a) b (c) Z 1 42 42 0 -1 2097152 0", Stat{Comm: "a) b (c", State: 'Z', PPID: 1, Flags: 2097152}, false},
		{"no comm", "42 bash S 7", Stat{}, true},
		{"short", "42 (bash) S 7", Stat{}, true},
		{"bad ppid", "42 (bash) S x 42 42 0 -1 0", Stat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.in))
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("ParseStat(%q) = %+v, %v; want %+v, error %t", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name, in string
		want     Status
		err      bool
	}{
		{"full", "Name:\tx\nUid:\t1000\t1001\t1002\t1003\nGid:\t10\t11\t12\t13\nGroups:\t4 24 27 \n", Status{UID: [4]int{1000, 1001, 1002, 1003}, GID: [4]int{10, 11, 12, 13}, Groups: []int{4, 24, 27}}, false},
		{"no groups", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n", Status{}, false},
		{"no Gid", "Uid:\t0\t0\t0\t0\n", Status{}, true},
		{"short Uid", "Uid:\t0\t0\nGid:\t0\t0\t0\t0\n", Status{}, true},
		{"bad group", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\tx\n", Status{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatus([]byte(tt.in))
			if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseStatus(%q) = %+v, %v; want %+v, error %t", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

// TestReadSelf reads this process's own files and compares them with what
// the os package says about it.
func TestReadSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SKIPPED: /proc/PID/stat and status are Linux's")
	}
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != os.Getppid() || !st.Alive() || !Alive(os.Getpid()) {
		t.Errorf("ReadStat(self) = %+v, Alive %t; want ppid %d, alive", st, Alive(os.Getpid()), os.Getppid())
	}
	s, err := ReadStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.UID[Real] != os.Getuid() || s.UID[Effective] != os.Geteuid() || s.GID[Real] != os.Getgid() {
		t.Errorf("ReadStatus(self) = %+v; want uid %d euid %d gid %d", s, os.Getuid(), os.Geteuid(), os.Getgid())
	}
	if _, err := ReadStat(-1); err == nil {
		t.Error("ReadStat(-1) succeeded")
	}
}

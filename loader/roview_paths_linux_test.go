//go:build linux

package loader

import "testing"

// TestROViewPaths: how an event's path arguments and the directory the
// program walked (names leaf first, '/'-terminated) become the file names
// of the record.
func TestROViewPaths(t *testing.T) {
	const atFDCWD = -100
	tests := []struct {
		name             string
		path, path2, dir string
		flags            uint32
		op               ROViewOp
		dirfd, dirfd2    int32
		want             ROViewPaths
	}{
		{name: "absolute", path: "/etc/hostname", op: ROViewOpChmod, dirfd: atFDCWD,
			want: ROViewPaths{Path: "/etc/hostname"}},
		{name: "relative to the working directory", path: "../x", dir: "ws/home/", flags: ROViewDirSet, op: ROViewOpOpen, dirfd: atFDCWD,
			want: ROViewPaths{Path: "/home/x"}},
		{name: "relative to the root", path: "etc/x", dir: "", flags: ROViewDirSet, op: ROViewOpOpen, dirfd: atFDCWD,
			want: ROViewPaths{Path: "/etc/x"}},
		{name: "fd-only call names the fd's file", dir: "victim/outside/", flags: ROViewDirSet | ROViewDirIsFile, op: ROViewOpChmod,
			want: ROViewPaths{Path: "/outside/victim"}},
		{name: "empty path with AT_EMPTY_PATH", path: "", dir: "f/d/", flags: ROViewDirSet | ROViewDirIsFile, op: ROViewOpChown, dirfd: 3,
			want: ROViewPaths{Path: "/d/f"}},
		{name: "dirfd names no open file", path: "x", flags: ROViewNoDir, op: ROViewOpOpen, dirfd: 7,
			want: ROViewPaths{Path: "x", Relative: true}},
		{name: "truncated directory", path: "x", dir: "c/b/", flags: ROViewDirSet | ROViewDirTruncated, op: ROViewOpOpen, dirfd: atFDCWD,
			want: ROViewPaths{Path: "/b/c/x", Truncated: true}},
		{name: "rename's new name in the same directory", path: "a", path2: "b", dir: "d/", flags: ROViewDirSet, op: ROViewOpRename,
			dirfd: atFDCWD, dirfd2: atFDCWD, want: ROViewPaths{Path: "/d/a", Path2: "/d/b"}},
		{name: "rename's new name relative to another dirfd stays as given", path: "a", path2: "b", dir: "d/", flags: ROViewDirSet,
			op: ROViewOpRename, dirfd: atFDCWD, dirfd2: 5, want: ROViewPaths{Path: "/d/a", Path2: "b"}},
		{name: "a symlink's target is content, never completed", path: "link", path2: "target", dir: "d/", flags: ROViewDirSet,
			op: ROViewOpSymlink, dirfd: atFDCWD, dirfd2: atFDCWD, want: ROViewPaths{Path: "/d/link", Path2: "target"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e ROViewEvent
			copyC(e.Path[:], tt.path)
			copyC(e.Path2[:], tt.path2)
			copyC(e.Dir[:], tt.dir)
			e.DirOff = uint16(len(tt.dir))
			e.Flags, e.Op, e.Dirfd, e.Dirfd2 = tt.flags, uint32(tt.op), tt.dirfd, tt.dirfd2
			if got := e.Paths(); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestROViewCommandLine(t *testing.T) {
	var e ROViewEvent
	args := "touch\x00../outside.txt\x00"
	copyC(e.Args[:], args)
	e.ArgsLen = uint16(len(args))
	if got := e.CommandLine(); got != "touch ../outside.txt" {
		t.Errorf("command line %q", got)
	}
}

// TestROViewTable: every entry names a file the way the program can read
// it (argument positions 1-6), and the calls the read-only view refuses
// most are there.
func TestROViewTable(t *testing.T) {
	table := ROViewTable()
	for nr, c := range table {
		s := c.Syscall
		for _, pos := range []uint8{s.Path, s.Dirfd, s.Path2, s.Dirfd2, s.Fd} {
			if pos > 6 {
				t.Errorf("%s (%d): argument position %d", c.Name, nr, pos)
			}
		}
		if c.Op == ROViewOpUnknown || c.Name == "" || uint8(c.Op) != s.Op {
			t.Errorf("%s (%d): op %v, syscall %+v", c.Name, nr, c.Op, s)
		}
		if c.Op != ROViewOpQuery && s.Path == 0 && s.Fd == 0 {
			t.Errorf("%s (%d): names no file", c.Name, nr)
		}
	}
	for _, name := range []string{"openat", "fchmodat", "fchownat", "utimensat", "unlinkat", "renameat2", "mkdirat", "fchmod"} {
		found := false
		for _, c := range table {
			found = found || c.Name == name
		}
		if !found {
			t.Errorf("%s missing from the table", name)
		}
	}
}

func copyC(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst); i++ {
		dst[i] = int8(s[i])
	}
}

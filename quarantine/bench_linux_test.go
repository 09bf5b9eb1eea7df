//go:build linux

package quarantine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

// BenchmarkCreateUnderWatch is the cost a session's file creation pays
// for the watch: create+close of a new file in a writable root, with no
// watch and with the watch on the root's filesystem (every creation there
// queues an event the supervisor reads and discards by name).
//
//	go test -run '^$' -bench CreateUnderWatch -count 6 ./quarantine/
func BenchmarkCreateUnderWatch(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: fanotify filesystem marks")
	}
	for _, watched := range []bool{false, true} {
		b.Run(fmt.Sprintf("watch=%v", watched), func(b *testing.B) {
			ws := b.TempDir()
			if watched {
				c := &policy.Compiled{FilesystemRules: true, WritableRoots: []policy.Anchor{{Path: ws, Exists: true}},
					ProtectedPatterns: []policy.ProtectedPattern{{Components: []string{".claude"}, Type: policy.EntryAny}}}
				w, err := Start(Options{Session: "s-bench", Policy: c, Dir: b.TempDir(), InSession: func(int) (bool, bool) { return true, true }})
				if err != nil {
					b.Fatal(err)
				}
				if w.fan < 0 {
					b.Skip("no fanotify here")
				}
				defer w.Close()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				fd, err := unix.Open(filepath.Join(ws, fmt.Sprintf("f%d", i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				unix.Close(fd)
			}
		})
	}
}

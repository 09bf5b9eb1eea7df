//go:build !unix

package treescan

import (
	"fmt"
	"os"
	"path/filepath"
)

// dirID is a directory's identity and change time; without a ctime
// (Windows) nothing is remembered and every scan reads every directory.
type dirID struct {
	dev, ino uint64
	ctime    int64
}

func lstatDir(path string) (dirID, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return dirID{}, err
	}
	if !fi.IsDir() {
		return dirID{}, fmt.Errorf("%s is not a directory", path)
	}
	return dirID{}, nil
}

func ownedByMe(os.FileInfo) bool { return false }

func fileUID() int { return -1 }

func idOf(os.FileInfo) (dev, ino uint64, ctime int64) { return 0, 0, 0 }

// statAt looks up directories below a scan's root by full path.
type statAt struct{ root string }

func openAt(root string, _ dirID) (statAt, func(), error) {
	return statAt{root: root}, func() {}, nil
}

func (a statAt) openDir(rel string) (*os.File, error) {
	return os.Open(filepath.Join(a.root, filepath.FromSlash(rel)))
}

func (a statAt) lstatDir(rel string) (dirID, error) {
	return lstatDir(filepath.Join(a.root, filepath.FromSlash(rel)))
}

func accessShared() bool { return true }

// threadAccess is a thread's own file access, which this OS does not
// have (accessShared).
type threadAccess struct{}

func currentAccess() (threadAccess, bool) { return threadAccess{}, false }

func (threadAccess) adopt() bool { return false }

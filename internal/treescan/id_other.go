//go:build !unix

package treescan

import (
	"fmt"
	"os"
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

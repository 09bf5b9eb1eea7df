//go:build !unix

package policy

import "io/fs"

// fileID has no (dev, ino) to offer on this OS; path-based backends use
// Anchor.Path instead.
func fileID(fs.FileInfo) (dev, ino uint64) { return 0, 0 }

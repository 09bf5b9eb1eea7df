//go:build unix && !linux

package treescan

import "os"

func fileUID() int { return os.Geteuid() }

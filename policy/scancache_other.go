//go:build !unix

package policy

// ScanCacheDir: without ctime there is nothing to remember (treescan).
func ScanCacheDir(int) (string, error) { return "", nil }

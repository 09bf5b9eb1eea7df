//go:build !linux

package treescan

// ctimeUntrusted: elsewhere every filesystem's ctimes are taken as kept
// by the kernel (macOS's local filesystems; Windows remembers nothing).
func ctimeUntrusted(string) string { return "" }

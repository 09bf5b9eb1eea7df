//go:build linux && !amd64 && !arm64

package loader

// roviewCalls: no table for this architecture; refusals are reported
// with their system call number and no path.
var roviewCalls = map[int]roviewCall{}

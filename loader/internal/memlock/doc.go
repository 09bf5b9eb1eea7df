// Package memlock raises RLIMIT_MEMLOCK before BPF objects are created: the
// one copy of that step for package loader and the BPF programs its tests
// load.
package memlock

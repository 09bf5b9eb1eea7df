// Package fsvm holds the BPF-LSM filesystem benchmark, which only runs in
// the kernel-test VM (BPF-LSM programs do not load on ordinary hosts). It
// is a test so that internal/vmtest can build and boot it; oxbench's vm
// suite starts it and turns its output into a figure. It asserts that the
// measured sessions really enforce, never how fast they are.
package fsvm

// Package vmtest runs Go test binaries inside a qemu VM booted from the
// distribution's kernel package, so tests of kernel features this host
// refuses (BPF-LSM above all) run in CI on a known kernel.
//
// The VM: qemu-system-x86_64 under TCG (no KVM needed), the host root
// shared read-only over virtio-9p with a tmpfs overlay on top, entered with
// switch_root from a busybox initramfs, so every host tool and the test
// binaries are present in the guest. A small Go PID 1 (cmd/vmtest-guest)
// mounts the kernel filesystems, runs the test binaries one after another
// as its children with OXSUPERVISE_VMTEST=1 and TMPDIR on a guest tmpfs,
// and reports each exit status on the serial console with a per-run nonce.
// A job without a reported status, a guest panic or a timeout is a failure.
//
// The initramfs and an uncompressed PVH vmlinux (which qemu boots without
// BIOS or in-guest decompression, several seconds faster under TCG) are
// cached per kernel version in the cache directory (.vmtest/ by default).
package vmtest

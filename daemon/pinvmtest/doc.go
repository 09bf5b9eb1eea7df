// Package pinvmtest proves in the kernel-test VM (internal/vmtest, where
// BPF-LSM loads) that the daemon's pinned BPF-LSM filesystem rules keep a
// session confined while no daemon runs, and that a restarted daemon
// adopts the session and retires the pinned generation it took over. It
// holds tests only; a package of its own keeps the rest of the daemon's
// tests out of the slow VM.
package pinvmtest

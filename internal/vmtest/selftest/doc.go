// Package selftest holds tests of the kernel-test VM itself: that the guest
// is set up as the project's tests assume, and a deliberately failing test
// that internal/vmtest runs to prove it reports failures.
package selftest

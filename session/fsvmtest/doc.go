// Package fsvmtest proves, in the kernel-test VM, that sessions enforce
// their filesystem rules with BPF-LSM (session.FSLayer): run with Landlock
// stacked on top and alone, attach of a running process, and the audit
// record of each refusal. It is a package of its own so that only these
// tests, not all of package session's, join `make vmtest`. It has no API.
package fsvmtest

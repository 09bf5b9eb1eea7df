// Package escapetest owns the escape table of issue #20: the classes of
// attack a session may try to reach past its boundary (metadata outside
// the writable roots, a root session's capabilities, socket families,
// protected names created during the session, unix sockets outside it,
// /dev/shm, a symlink at a protected name, the user's build caches, a
// child started in another cgroup with clone3), each as real syscalls
// performed inside `oxsupervise run`, with what each enforcement path
// must answer: the errno of every step, the state of the files
// afterwards and the audit record (or that there is none, and why).
//
// The table is defined once (table_linux.go) and run by both paths: a
// host test in package session (the Landlock path on a kernel without
// BPF-LSM) and a test in session/fsvmtest (the BPF-LSM path, in the
// kernel-test VM). Which path a run takes, and what the kernel offers
// (Landlock ABI, kernel audit of seccomp), come from probes independent
// of the code under test (probe_linux.go), never from the host's name.
//
// A test binary that runs the table registers Op under OpName in its
// testutil.RunOp table: the session's script runs that binary again to
// perform each step (op_linux.go). The package has no tests of its own;
// it is not in the VM pass by itself.
package escapetest

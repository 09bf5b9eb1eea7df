package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
)

// Helper processes: a test that needs a process of its own — one to put in
// a session cgroup, restrict with Landlock, run as another user or inside a
// shell script in a session — starts the test binary again and has it run
// one op instead of the tests, as go-landlock's lltest.RunInSubprocess runs
// a test function in a fresh process. The package registers its ops and
// dispatches first thing in TestMain:
//
//	var ops = map[string]testutil.Op{"mkdir": mkdirOp}
//
//	func TestMain(m *testing.M) {
//		testutil.RunOp(ops)
//		os.Exit(m.Run())
//	}
//
// and a test starts one with OpCommand (or puts OpArgs after any path of the
// binary, or into a shell script run inside a session). The op's output and exit code are the
// test's to read; the op itself asserts nothing.

// Op is one thing a test binary does as a helper process; args are the
// arguments after its name, the result is the process's exit code.
type Op func(args []string) int

// opFlag, joined with the op's name, is a helper process's first argument.
// It looks like a test flag so that nobody mistakes it for a product verb.
const opFlag = "-oxsupervise.test.op="

// RunOp runs the op this process was started for and exits with its code.
// It returns at once when the process was started to run tests. An unknown
// op exits 2 naming the ops there are.
func RunOp(ops map[string]Op) {
	if len(os.Args) < 2 {
		return
	}
	name, ok := strings.CutPrefix(os.Args[1], opFlag)
	if !ok {
		return
	}
	op, ok := ops[name]
	if !ok {
		names := make([]string, 0, len(ops))
		for n := range ops {
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintf(os.Stderr, "test helper: no op %q (ops: %s)\n", name, strings.Join(names, ", "))
		os.Exit(2)
	}
	os.Exit(op(os.Args[2:]))
}

// OpArgs is the command line, after the executable, that makes a test
// binary run op with args.
func OpArgs(op string, args ...string) []string {
	return append([]string{opFlag + op}, args...)
}

// OpCommand returns the command (not started) that runs op with args in a
// new process of this test binary, with this process's environment; the
// caller adds stdin, credentials or a cgroup before starting it.
func OpCommand(op string, args ...string) *exec.Cmd {
	return exec.Command(os.Args[0], OpArgs(op, args...)...)
}

// ReportErrno is how an op reports one syscall's outcome: it prints the
// errno as a number on stdout (0 for success) and returns 0, or, for an
// error that carries no errno, prints it on stderr and returns 2.
func ReportErrno(err error) int {
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Println(0)
	case errors.As(err, &errno):
		fmt.Println(int(errno))
	default:
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

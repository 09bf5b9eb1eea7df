package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

var testOps = map[string]Op{
	"echo": func(args []string) int {
		os.Stdout.WriteString(strings.Join(args, "|"))
		return 0
	},
	"exit": func(args []string) int { return len(args) + 3 },
}

func TestMain(m *testing.M) {
	RunOp(testOps)
	os.Exit(m.Run())
}

func TestOpCommand(t *testing.T) {
	out, err := OpCommand("echo", "a b", "", "c'd").Output()
	if err != nil || string(out) != "a b||c'd" {
		t.Errorf("echo op: %q, %v", out, err)
	}
	err = OpCommand("exit", "x").Run()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 4 {
		t.Errorf("exit op: %v, want exit status 4", err)
	}
	out, err = OpCommand("nope").CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), `no op "nope" (ops: echo, exit)`) {
		t.Errorf("unknown op: %q, %v", out, err)
	}
}

package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestDaemonVerbsUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no.sock")
	for _, tc := range []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{[]string{"daemon", "--help"}, exitOK, "--admin-group", ""},
		{[]string{"approvals", "--help"}, exitOK, "--json", ""},
		{[]string{"approve", "--help"}, exitOK, "--always", ""},
		{[]string{"exec", "--help"}, exitOK, "--unsandboxed", ""},
		{[]string{"daemon", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{[]string{"daemon", "--help"}, exitOK, "--pin-dir", ""},
		{[]string{"daemon", "--max-conns", "0"}, exitUsage, "", "--max-conns (0)"},
		{[]string{"daemon", "--help"}, exitOK, "--kernel-buffer", ""},
		{[]string{"daemon", "--kernel-buffer", "3M"}, exitUsage, "", `--kernel-buffer: kernel buffer "3M": 3145728 bytes is not a power of two from 64K to 1G`},
		{[]string{"daemon", "--kernel-buffer", "lots"}, exitUsage, "", `--kernel-buffer: kernel buffer "lots"`},
		{[]string{"daemon", "--max-conns-per-user", "-1"}, exitUsage, "", "--max-conns-per-user (-1) must be at least 1"},
		{[]string{"approve", "a-1"}, exitUsage, "", "exactly one of --once, --always, --reject"},
		{[]string{"approve", "a-1", "--once", "--reject"}, exitUsage, "", "exactly one of --once, --always, --reject"},
		{[]string{"approve", "--once"}, exitUsage, "", "exactly one approval ID"},
		{[]string{"exec", "--", "true"}, exitUsage, "", "--unsandboxed is required"},
		{[]string{"exec", "--unsandboxed"}, exitUsage, "", "no command given"},
		{[]string{"approvals", "--socket", missing}, exitFail, "", missing},
		{[]string{"approve", "a-1", "--once", "--socket", missing}, exitFail, "", missing},
		{[]string{"exec", "--unsandboxed", "--socket", missing, "--", "true"}, exitFail, "", missing},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(tc.args, streams{strings.NewReader(""), &out, &errb})
			if code != tc.code || !strings.Contains(out.String(), tc.inStdout) || !strings.Contains(errb.String(), tc.inStderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", code, tc.code, out.String(), tc.inStdout, errb.String(), tc.inStderr)
			}
		})
	}
}

//go:build linux

package vmtest

import "testing"

func TestGuestPath(t *testing.T) {
	tests := []struct{ host, guest string }{
		{"/work/main/loader", "/work/main/loader"},
		{"/tmp/othertree/loader", hostTmp + "/othertree/loader"},
		{"/tmpfoo/x", "/tmpfoo/x"},
	}
	for _, tt := range tests {
		if got := guestPath(tt.host); got != tt.guest {
			t.Errorf("guestPath(%q) = %q, want %q", tt.host, got, tt.guest)
		}
	}
}

func TestGuestEnv(t *testing.T) {
	got := guestEnv([]string{
		CLIEnv + "=/tmp/clone/.vmtest/run-1/oxsupervise",
		"PLAIN=value",
		"ELSEWHERE=/work/main/bin/x",
		"NOEQUALS",
	})
	want := []string{
		CLIEnv + "=" + hostTmp + "/clone/.vmtest/run-1/oxsupervise",
		"PLAIN=value",
		"ELSEWHERE=/work/main/bin/x",
		"NOEQUALS",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("guestEnv[%d] = %q, want %q", i, got[i], want[i])
		}
	}
}

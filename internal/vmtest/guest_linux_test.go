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

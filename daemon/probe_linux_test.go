//go:build linux

package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProbe: a client falls back to a standalone run only when no daemon
// listens; a daemon that does not answer is an error of its own.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	silent := filepath.Join(dir, "silent.sock")
	ln, err := net.Listen("unix", silent)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepted, never answered
		}
	}()
	stale := filepath.Join(dir, "stale.sock")
	l2, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l2.(*net.UnixListener).SetUnlinkOnClose(false)
	l2.Close() // the socket file stays, nobody listens
	file := filepath.Join(dir, "file.sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, socket string
		noDaemon     bool
	}{
		{"missing", filepath.Join(dir, "absent.sock"), true},
		{"stale socket", stale, true},
		{"not a socket", file, true},
		{"silent daemon", silent, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := probe(tt.socket, 300*time.Millisecond)
			if err == nil {
				t.Fatal("probe succeeded")
			}
			if got := errors.Is(err, ErrNoDaemon); got != tt.noDaemon {
				t.Fatalf("probe: %v; ErrNoDaemon = %v, want %v", err, got, tt.noDaemon)
			}
		})
	}
}

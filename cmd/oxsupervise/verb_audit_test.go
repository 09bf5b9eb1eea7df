package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// writeTestLog writes a small log: two sessions, several ops, one old
// record, and rotates once so the history spans two files.
func writeTestLog(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	sink, err := audit.OpenFileSink(path, audit.SinkOptions{MaxBytes: 1200, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	now := time.Now()
	recs := []*audit.Record{
		{Timestamp: now.Add(-3 * time.Hour), Ox: audit.Ox{Kind: audit.KindSessionStart, Session: "s1", Layer: audit.LayerSupervisor, PolicyDigest: "sha256:00"}},
		{Timestamp: now.Add(-3 * time.Hour), Process: &audit.Process{PID: 10}, File: &audit.File{Path: "/old"}, Event: audit.Event{Action: "open"},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: "s1", Layer: audit.LayerLandlock, Class: audit.ClassFile, Errno: 13}},
		{Timestamp: now.Add(-time.Minute), Process: &audit.Process{PID: 10}, File: &audit.File{Path: "/etc/a"}, Event: audit.Event{Action: "open"},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: "s1", Layer: audit.LayerLandlock, Class: audit.ClassFile, Errno: 13}},
		{Timestamp: now.Add(-time.Minute), Process: &audit.Process{PID: 11}, File: &audit.File{Path: "/etc/b"}, Event: audit.Event{Action: "unlink"},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: "s1", Layer: audit.LayerBPFLSM, Class: audit.ClassFile, Errno: 1}},
		{Timestamp: now.Add(-time.Minute), Process: &audit.Process{PID: 20}, File: &audit.File{Path: "/etc/c"}, Event: audit.Event{Action: "open"},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: "s2", Layer: audit.LayerBPFLSM, Class: audit.ClassFile, Errno: 13}},
		{Timestamp: now, Ox: audit.Ox{Kind: audit.KindSessionStop, Session: "s1", Layer: audit.LayerSupervisor, PolicyDigest: "sha256:00"}},
	}
	for _, r := range recs {
		if err := sink.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if sink.Stats().Rotations == 0 {
		t.Fatal("test log did not rotate; history is not exercised")
	}
	return path
}

func runAuditTail(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cmdAudit(ctx, streams{in: strings.NewReader(""), out: &out, err: &errb}, append([]string{"tail"}, args...))
	return code, out.String(), errb.String()
}

func TestAuditTailFilters(t *testing.T) {
	path := writeTestLog(t)
	tests := []struct {
		name string
		args []string
		want []string // file paths or kinds, in order
	}{
		{"everything", nil, []string{"session_start", "/old", "/etc/a", "/etc/b", "/etc/c", "session_stop"}},
		{"session", []string{"--session", "s2"}, []string{"/etc/c"}},
		{"pid", []string{"--pid", "10"}, []string{"/old", "/etc/a"}},
		{"op", []string{"--op", "unlink"}, []string{"/etc/b"}},
		{"op names a kind", []string{"--op", "session_stop"}, []string{"session_stop"}},
		{"since", []string{"--since", "10m"}, []string{"/etc/a", "/etc/b", "/etc/c", "session_stop"}},
		{"combined", []string{"--session", "s1", "--op", "open", "--since", "1h"}, []string{"/etc/a"}},
		{"nothing matches", []string{"--session", "s1", "--pid", "20"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runAuditTail(t, context.Background(), append([]string{"--json", "--audit-log", path}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if line == "" {
					continue
				}
				r, err := audit.Decode([]byte(line))
				if err != nil {
					t.Fatalf("--json line does not decode: %v", err)
				}
				if r.File != nil {
					got = append(got, r.File.Path)
				} else {
					got = append(got, string(r.Ox.Kind))
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAuditTailHuman(t *testing.T) {
	path := writeTestLog(t)
	code, out, errOut := runAuditTail(t, context.Background(), "--audit-log", path, "--op", "unlink")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	line := strings.TrimSpace(out)
	for _, want := range []string{"s1", "bpf-lsm", "denial", "unlink", "11", "/etc/b", "EPERM"} {
		if !strings.Contains(line, want) {
			t.Errorf("human output %q lacks %q", line, want)
		}
	}
	if strings.Contains(out, "\x1b[") || strings.HasPrefix(line, "{") {
		t.Errorf("output to a non-terminal is coloured or JSON: %q", out)
	}
}

func TestAuditTailErrors(t *testing.T) {
	path := writeTestLog(t)
	tests := []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"bad since", []string{"--audit-log", path, "--since", "yesterday"}, exitUsage, "--since"},
		{"negative pid", []string{"--audit-log", path, "--pid", "-3"}, exitUsage, "--pid"},
		{"unknown flag", []string{"--colour"}, exitUsage, "unknown flag"},
		{"stray argument", []string{"--audit-log", path, "extra"}, exitUsage, "extra"},
		{"missing log", []string{"--audit-log", filepath.Join(t.TempDir(), "none.jsonl")}, exitFail, "none.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runAuditTail(t, context.Background(), tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.message) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, errOut, tt.code, tt.message)
			}
		})
	}
	code, out, _ := runAuditTail(t, context.Background(), "--help")
	if code != exitOK || !strings.Contains(out, "usage: oxsupervise audit tail") || !strings.Contains(out, "--audit-log") {
		t.Errorf("--help: exit %d, stdout %q", code, out)
	}
	var outb, errb bytes.Buffer
	if code := cmdAudit(context.Background(), streams{out: &outb, err: &errb}, []string{"head"}); code != exitUsage {
		t.Errorf("audit head: exit %d, want usage error", code)
	}
}

func TestAuditTailFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	sink, err := audit.OpenFileSink(path, audit.SinkOptions{MaxBytes: 600, Keep: 100, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out lockedBuffer
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cmdAudit(ctx, streams{out: &out, err: &errb}, []string{"tail", "-f", "--json", "--audit-log", path, "--session", "s1"})
	}()
	write := func(i int, session string) {
		r := &audit.Record{Process: &audit.Process{PID: i + 1}, Event: audit.Event{Action: "connect"},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: session, Layer: audit.LayerCgroupNet, Class: audit.ClassNetwork, Errno: 1}}
		if err := sink.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	waitLines := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(out.String(), "\n") < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	// -f starts at the live file: wait until the follower has shown a
	// first record before rotating under it.
	write(0, "s1")
	waitLines(1)
	for i := 1; i < 40; i++ {
		session := "s1"
		if i%2 == 1 {
			session = "s2"
		}
		write(i, session)
	}
	waitLines(20)
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("tail -f exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, line := range lines {
		r, err := audit.Decode([]byte(line))
		if err != nil || r.Process.PID != 2*i+1 {
			t.Fatalf("line %d: %v %+v, want pid %d", i, err, r.Process, 2*i+1)
		}
	}
	if len(lines) != 20 {
		t.Fatalf("tail -f printed %d lines, want the 20 of session s1 (rotations: %d; stderr %q)", len(lines), sink.Stats().Rotations, errb.String())
	}
	if sink.Stats().Rotations == 0 {
		t.Fatal("log did not rotate during the follow")
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

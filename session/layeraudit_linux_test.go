//go:build linux

package session

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/policy"
)

// A layer writes into the sink the session brings and leaves it open for
// the others; only a sink it had to open itself is its to close.
func TestSessionAuditSharesTheSessionSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, Audit: policy.Audit{Path: path}}
	denial := func(id string) *audit.Record {
		return &audit.Record{Event: audit.Event{Action: "connect"}, Ox: audit.Ox{Kind: audit.KindDenial, Session: id, Layer: audit.LayerCgroupNet, Class: audit.ClassNetwork}}
	}
	var warn bytes.Buffer

	shared, err := audit.OpenFileSink(path, audit.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := openSessionAudit(SessionInfo{ID: "s1", Policy: c, Audit: shared}, audit.FloodOptions{}, &warn, "network")
	if a.sink != shared || a.ownSink || a.w == nil {
		t.Fatalf("with the session's sink: sink %p (shared %p), own %t, flood control %v", a.sink, shared, a.ownSink, a.w)
	}
	writeRecord(a.w, denial("s1"), &warn)
	a.close(&warn)
	if err := shared.Write(denial("s1")); err != nil {
		t.Errorf("the session's sink was closed by a layer: %v", err)
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}

	own := openSessionAudit(SessionInfo{ID: "s2", Policy: c}, audit.FloodOptions{}, &warn, "network")
	if own.sink == nil || !own.ownSink || own.sink.Path() != path {
		t.Fatalf("without one: sink %v, own %t", own.sink, own.ownSink)
	}
	writeRecord(own.w, denial("s2"), &warn)
	own.close(&warn)
	if err := own.sink.Write(denial("s2")); err == nil {
		t.Error("a sink the layer opened itself stayed open after close")
	}
	if warn.String() != "" {
		t.Errorf("warnings: %q", warn.String())
	}
	var got []string
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		r, err := audit.DecodeStrict([]byte(line))
		if err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		got = append(got, r.Ox.Session)
	}
	if strings.Join(got, ",") != "s1,s1,s2" {
		t.Errorf("records by session %v, want s1,s1,s2", got)
	}
}

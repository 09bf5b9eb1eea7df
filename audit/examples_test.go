package audit

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

var updateDoc = flag.Bool("update", false, "rewrite the examples in docs/audit-schema.md")

const schemaDoc = "../docs/audit-schema.md"

type example struct {
	title string
	rec   Record
}

// exampleRecords is one record of every kind (and every denial class), as
// producers would build them: only producer-known fields, no ECS
// categorisation, which Normalize derives.
func exampleRecords() []example {
	at := time.Date(2026, 11, 30, 3, 14, 15, 926535000, time.UTC)
	proc := func() *Process {
		return &Process{PID: 4242, Name: "bash", Executable: "/usr/bin/bash",
			CommandLine: "bash -c echo x > /etc/passwd", Thread: &Thread{ID: 4242}, Parent: &Parent{PID: 4200}}
	}
	const session = "s-7f3a9c"
	const digest = "sha256:9b1c6c3e1d0f4e0aa4d2f06b1d3e55b3b2a4c5d6e7f8091a2b3c4d5e6f708192"
	return []example{
		{"denial, file (BPF-LSM), enriched from /proc", Record{Timestamp: at,
			Process: &Process{PID: 4242, Name: "bash", Executable: "/usr/bin/bash",
				CommandLine: "bash -c echo x > /etc/passwd", Thread: &Thread{ID: 4242},
				Parent: &Parent{PID: 4200, Name: "node", Executable: "/usr/bin/node"}},
			User:  &User{ID: "1000"},
			File:  &File{Path: "/etc/passwd", Device: "254:1", Inode: 1311},
			Event: Event{Action: "open"},
			Ox: Ox{Kind: KindDenial, Session: session, Layer: LayerBPFLSM, Class: ClassFile,
				Errno: 13, Rule: "outside writable roots", Mode: "workspace-write",
				Ancestry: []Ancestor{{PID: 4200, Name: "node"}, {PID: 4100, Name: "oxsupervise"}, {PID: 3900, Name: "zsh"}},
				Enriched: []string{"process.executable", "process.command_line", "process.parent.pid",
					"process.parent.name", "process.parent.executable", "oxsupervise.ancestry"}}}},
		{"denial, file (Landlock, from the kernel audit log)", Record{Timestamp: at,
			Process: &Process{PID: 4243, Name: "touch", Executable: "/usr/bin/touch", Parent: &Parent{PID: 4242}},
			User:    &User{ID: "1000"},
			File:    &File{Path: "/home/dev/.bashrc", Device: "vda1", Inode: 52},
			Event:   Event{Action: "open"},
			Ox: Ox{Kind: KindDenial, Session: session, Layer: LayerLandlock, Class: ClassFile,
				Errno: 13, Rule: "fs.write_file", LandlockDomain: "1a6fdc66f"}}},
		{"denial, file (read-only view, EROFS before any LSM)", Record{Timestamp: at,
			Process: &Process{PID: 4244, Name: "chmod", CommandLine: "chmod 777 /home/dev/.bashrc", Thread: &Thread{ID: 4244}, Parent: &Parent{PID: 4242}},
			User:    &User{ID: "1000"},
			File:    &File{Path: "/home/dev/.bashrc"},
			Event:   Event{Action: "chmod", Reason: "fchmodat"},
			Ox: Ox{Kind: KindDenial, Session: session, Layer: LayerReadOnlyView, Class: ClassFile,
				Errno: 30, Rule: "read-only outside the writable roots", Mode: "workspace-write"}}},
		{"denial, network", Record{Timestamp: at, Process: proc(), User: &User{ID: "1000"},
			Destination: &Destination{IP: netip.MustParseAddr("169.254.169.254"), Port: 80},
			Network:     &Network{Transport: "tcp", Type: "ipv4"},
			Event:       Event{Action: "connect"},
			Ox: Ox{Kind: KindDenial, Session: session, Layer: LayerCgroupNet, Class: ClassNetwork,
				Errno: 1, Rule: "cloud metadata", Mode: "workspace-write"}}},
		{"denial, dns", Record{Timestamp: at, Process: &Process{PID: 4250, Name: "curl"},
			DNS:   &DNS{Question: DNSQuestion{Name: "exfil.example.net", Type: "A"}, ResponseCode: "REFUSED"},
			Event: Event{Action: "dns"},
			Ox:    Ox{Kind: KindDenial, Session: session, Layer: LayerResolver, Class: ClassDNS, Rule: "not in network.allow"}}},
		{"denial, self-protection", Record{Timestamp: at, Process: proc(), User: &User{ID: "1000"},
			Event: Event{Action: "ptrace"},
			Ox: Ox{Kind: KindDenial, Session: session, Layer: LayerBPFLSM, Class: ClassSelfProtection,
				Errno: 1, Rule: "target outside session"}}},
		{"denial, agent state rolled back (supervisor, after the session)", Record{Timestamp: at,
			Message: "session s-7f3a9c changed mcpServers in /home/dev/.claude.json (profile claude-code); rolled back",
			User:    &User{ID: "1000"},
			File:    &File{Path: "/home/dev/.claude.json"},
			Event:   Event{Action: "rollback"},
			Ox: Ox{Kind: KindDenial, Session: session, Layer: LayerSupervisor, Class: ClassFile, Decision: "deny", Mode: "workspace-write",
				Rule: "agent profile claude-code: mcpServers starts programs (https://code.claude.com/docs/en/mcp (user and local scopes live in ~/.claude.json))"}}},
		{"events_lost", Record{Timestamp: at, Message: "ring buffer full",
			Ox: Ox{Kind: KindEventsLost, Layer: LayerBPFLSM, EventsLost: 1834}}},
		{"suppressed", Record{Timestamp: at,
			Ox: Ox{Kind: KindSuppressed, Session: session, Layer: LayerBPFLSM, Suppressed: 99120}}},
		{"session_start", Record{Timestamp: at, Process: proc(), User: &User{ID: "1000", Name: "dev"},
			Ox: Ox{Kind: KindSessionStart, Session: session, Layer: LayerSupervisor, Mode: "workspace-write", PolicyDigest: digest}}},
		{"session_stop", Record{Timestamp: at, Message: "command exited with status 0",
			Ox: Ox{Kind: KindSessionStop, Session: session, Layer: LayerSupervisor, Mode: "workspace-write", PolicyDigest: digest}}},
		{"approval", Record{Timestamp: at, User: &User{ID: "0", Name: "root"},
			Ox: Ox{Kind: KindApproval, Session: session, Layer: LayerSupervisor,
				Approval: &Approval{ID: "a-12", Decision: "once", Command: "docker ps"}}}},
		{"policy_change", Record{Timestamp: at, User: &User{ID: "0", Name: "root"},
			Message: "managed policy reloaded",
			Ox: Ox{Kind: KindPolicyChange, Session: session, Layer: LayerSupervisor, Rule: "/etc/oxsupervise/policy.toml",
				PolicyDigest: digest, PreviousPolicyDigest: "sha256:0c4f7b1f0e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccdd"}}},
	}
}

func renderExamples(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	enc := NewEncoder(nil)
	for _, ex := range exampleRecords() {
		line, err := enc.Marshal(&ex.rec)
		if err != nil {
			t.Fatalf("example %q: %v", ex.title, err)
		}
		fmt.Fprintf(&b, "#### %s\n\n```json\n%s```\n\n", ex.title, line)
	}
	return b.String()
}

const (
	beginMarker = "<!-- examples:begin (generated by go test ./audit -run TestSchemaDoc -update) -->\n"
	endMarker   = "<!-- examples:end -->"
)

// TestSchemaDoc keeps docs/audit-schema.md's examples identical to what
// the encoder writes for real records, and checks each example line decodes
// strictly (no field the Go type lacks) and re-encodes to the same bytes.
func TestSchemaDoc(t *testing.T) {
	doc, err := os.ReadFile(schemaDoc)
	if err != nil {
		t.Fatalf("read schema doc: %v", err)
	}
	begin := bytes.Index(doc, []byte(beginMarker))
	end := bytes.Index(doc, []byte(endMarker))
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the example markers", schemaDoc)
	}
	want := renderExamples(t)
	got := string(doc[begin+len(beginMarker) : end])
	if *updateDoc {
		var out bytes.Buffer
		out.Write(doc[:begin+len(beginMarker)])
		out.WriteString(want)
		out.Write(doc[end:])
		if err := os.WriteFile(schemaDoc, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		got = want
	}
	if got != want {
		t.Fatalf("%s examples are stale; run go test ./audit -run TestSchemaDoc -update", schemaDoc)
	}

	kinds := map[Kind]bool{}
	classes := map[Class]bool{}
	enc := NewEncoder(nil)
	n := 0
	for _, block := range strings.Split(got, "```json\n")[1:] {
		line := block[:strings.Index(block, "```")]
		rec, err := DecodeStrict([]byte(line))
		if err != nil {
			t.Fatalf("example does not decode strictly: %v\n%s", err, line)
		}
		again, err := enc.Marshal(&rec)
		if err != nil {
			t.Fatalf("decoded example does not re-encode: %v", err)
		}
		if string(again) != line {
			t.Fatalf("round trip changed the example:\n doc: %s\n got: %s", line, again)
		}
		kinds[rec.Ox.Kind] = true
		if rec.Ox.Kind == KindDenial {
			classes[rec.Ox.Class] = true
		}
		n++
	}
	for k := range kindECS {
		if !kinds[k] {
			t.Errorf("doc has no example of kind %s", k)
		}
	}
	for c := range classCategory {
		if !classes[c] {
			t.Errorf("doc has no example of a %s denial", c)
		}
	}
	if n != len(exampleRecords()) {
		t.Errorf("doc has %d examples, want %d", n, len(exampleRecords()))
	}
}

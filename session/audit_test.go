//go:build linux

package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// kernelAuditUsable probes, independently of the audit package, whether
// this process can join the kernel audit log multicast group.
func kernelAuditUsable(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/loginuid"); err != nil {
		t.Skip("kernel built without CONFIG_AUDIT: Landlock refusals cannot be audited here")
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		t.Skipf("no NETLINK_AUDIT socket (%v): Landlock refusals cannot be audited here", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (unix.AUDIT_NLGRP_READLOG - 1)}); err != nil {
		t.Skipf("cannot join the audit log group (%v): Landlock refusals cannot be audited here", err)
	}
}

type logRecord struct {
	Message string `json:"message"`
	Event   struct {
		Action string `json:"action"`
	} `json:"event"`
	File *struct {
		Path string `json:"path"`
	} `json:"file"`
	Process *struct {
		Name string `json:"name"`
	} `json:"process"`
	Ox struct {
		Kind    string `json:"kind"`
		Session string `json:"session"`
		Layer   string `json:"layer"`
		Errno   int    `json:"errno"`
		Rule    string `json:"rule"`
		Mode    string `json:"mode"`
	} `json:"oxsupervise"`
}

func TestRunAuditsLandlockDenial(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	kernelAuditUsable(t)
	e := newEnv(t)
	logPath := filepath.Join(e.base, "audit", "audit.jsonl")
	target := fmt.Sprintf("/etc/oxs-audit-test-%d", time.Now().UnixNano())
	// Outside the writable roots the read-only view refuses a write with
	// EROFS before Landlock is asked: the view's tracer audits it (layer
	// read-only-view). A credential read is Landlock's refusal, audited
	// through the kernel audit log.
	canary := filepath.Join(e.home, ".ssh", "canary")
	r := e.run(t, nil, "run", "--audit-log", logPath, "--", "sh", "-c",
		`"$FSOP" write `+target+`; "$FSOP" read `+canary+`; echo "session=$OXSUPERVISE_SESSION"`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "EROFS\nEACCES\n") {
		t.Fatalf("exit %d, stdout %q (want EROFS for the write, EACCES for the read), stderr %q", r.code, r.stdout, r.stderr)
	}
	if exists(target) {
		t.Fatalf("%s was created", target)
	}
	_, id, _ := strings.Cut(strings.TrimSpace(r.stdout[strings.Index(r.stdout, "session="):]), "session=")
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("audit log: %v (stderr %q)", err, r.stderr)
	}
	var start, stop, denial bool
	roview := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec logRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("bad audit line %q: %v", line, err)
		}
		if rec.Ox.Session != id {
			t.Errorf("record of another session %q in this session's log: %s", rec.Ox.Session, line)
			continue
		}
		switch rec.Ox.Kind {
		case "session_start":
			start = true
		case "session_stop":
			stop = true
		case "denial":
			if rec.Ox.Layer == "landlock" && rec.Ox.Errno == int(unix.EACCES) && rec.File != nil && rec.File.Path == canary &&
				rec.Process != nil && rec.Process.Name == "fsop" && rec.Ox.Mode == "workspace-write" {
				denial = true
			}
			if rec.Ox.Layer == "read-only-view" && rec.Ox.Errno == int(unix.EROFS) && rec.File != nil && rec.File.Path == target &&
				rec.Event.Action == "open" && rec.Process != nil && rec.Process.Name == "fsop" && rec.Ox.Mode == "workspace-write" &&
				rec.Ox.Rule == "read-only outside the writable roots" {
				roview++
			}
		}
	}
	if !start || !stop || !denial || roview != 1 {
		t.Errorf("audit log lacks records: session_start %v, session_stop %v, landlock denial of fsop reading %s %v, "+
			"read-only-view denials of fsop writing %s %d (want 1); stderr %q; log:\n%s",
			start, stop, canary, denial, target, roview, r.stderr, b)
	}
}

package kernelaudit

import (
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// TestSeccompRecords turns AUDIT_SECCOMP records as this kernel writes
// them (captured from a session) into audit records, attributed by pid
// while the process lives and by audit session id after it exited;
// SECCOMP_RET_LOG records (allowed calls) are not refusals.
func TestSeccompRecords(t *testing.T) {
	const (
		socket  = `audit(1796136372.068:17713): auid=0 uid=0 gid=0 ses=2 pid=5809 comm="f-fsop" exe="/tmp/f-fsop" sig=0 arch=c000003e syscall=41 compat=0 ip=0x4086ee code=0x50000`
		uring   = `audit(1796136372.068:17714): auid=0 uid=0 gid=0 ses=2 pid=5813 comm="f-fsop" exe="/tmp/f-fsop" sig=0 arch=c000003e syscall=425 compat=0 ip=0x4086ee code=0x50000`
		logged  = `audit(1796136372.068:17715): auid=0 uid=0 gid=0 ses=2 pid=5813 comm="f-fsop" exe="/tmp/f-fsop" sig=0 arch=c000003e syscall=0 compat=0 ip=0x4086ee code=0x7ffc0000`
		unknown = `audit(1796136372.068:17716): auid=0 uid=0 gid=0 ses=9 pid=77 comm="x" exe="/x" sig=0 arch=c000003e syscall=999 compat=0 ip=0x4086ee code=0x50000`
	)
	for _, tc := range []struct {
		name, text string
		bySes      map[uint32]string
		byPID      map[int]string
		want       *audit.Record // nil: no record
	}{
		{"socket by pid", socket, nil, map[int]string{5809: "s1"}, &audit.Record{Event: audit.Event{Action: "socket"}, Ox: audit.Ox{Session: "s1", Class: audit.ClassNetwork}}},
		{"io_uring by ses", uring, map[uint32]string{2: "s1"}, nil, &audit.Record{Event: audit.Event{Action: "io_uring_setup"}, Ox: audit.Ox{Session: "s1", Class: audit.ClassSelfProtection}}},
		{"allowed and logged", logged, map[uint32]string{2: "s1"}, nil, nil},
		{"other session", unknown, map[uint32]string{2: "s1"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAssembler(100 * time.Millisecond)
			a.sessionOfSes = func(ses uint32) (string, bool) { s, ok := tc.bySes[ses]; return s, ok }
			evs := a.add(mustParse(t, TypeSeccomp, tc.text), time.Unix(100, 0))
			var recs []audit.Record
			for _, ev := range evs {
				r, _ := a.records(ev, sessions(tc.byPID), false)
				recs = append(recs, r...)
			}
			if tc.want == nil {
				if len(recs) != 0 {
					t.Fatalf("got %d records, want none: %+v", len(recs), recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("got %d records, want 1", len(recs))
			}
			r := recs[0]
			if r.Event.Action != tc.want.Event.Action || r.Ox.Session != tc.want.Ox.Session || r.Ox.Class != tc.want.Ox.Class ||
				r.Ox.Layer != audit.LayerSeccomp || r.Ox.Kind != audit.KindDenial || r.Process == nil || r.Process.Name != "f-fsop" || r.Process.Executable != "/tmp/f-fsop" {
				t.Errorf("record %+v (process %+v)", r, r.Process)
			}
		})
	}
}

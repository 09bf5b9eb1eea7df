package kernelaudit

import (
	"strings"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

func mustParse(t *testing.T, typ uint16, text string) Message {
	t.Helper()
	m, err := ParseMessage(typ, []byte(text))
	if err != nil {
		t.Fatalf("ParseMessage(%q): %v", text, err)
	}
	return m
}

func TestParseMessage(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		serial uint64
		want   map[string]string
	}{
		{"landlock access, quoted",
			`audit(1729738800.268:30): domain=195ba459b blockers=fs.make_reg,fs.refer path="/usr/local" dev="vda2" ino=365`, 30,
			map[string]string{"domain": "195ba459b", "blockers": "fs.make_reg,fs.refer", "path": "/usr/local", "dev": "vda2", "ino": "365"}},
		{"hex-encoded path with a space",
			`audit(1.5:7): domain=1 blockers=fs.write_file path=2F746D702F6120622E747874 dev="tmpfs" ino=9`, 7,
			map[string]string{"path": "/tmp/a b.txt", "dev": "tmpfs"}},
		{"syscall with (null) key and trailing NUL",
			"audit(1729738800.268:30): arch=c000003e syscall=257 success=no exit=-13 ppid=1 pid=286 uid=1000 comm=\"touch\" exe=\"/usr/bin/touch\" key=(null)\x00", 30,
			map[string]string{"syscall": "257", "exit": "-13", "pid": "286", "comm": "touch", "exe": "/usr/bin/touch", "key": "(null)"}},
		{"proctitle is hex argv",
			`audit(2.0:1): proctitle=746F756368002F6574632F78`, 1,
			map[string]string{"proctitle": "touch\x00/etc/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, TypeLandlockAccess, tt.text)
			if m.Serial != tt.serial {
				t.Errorf("serial = %d, want %d", m.Serial, tt.serial)
			}
			for k, v := range tt.want {
				if got, ok := m.Fields.Get(k); !ok || got != v {
					t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
				}
			}
		})
	}
	if m := mustParse(t, 1, "audit(1729738800.268:30): x=1"); !m.Time.Equal(time.Unix(1729738800, 268e6)) {
		t.Errorf("time = %v", m.Time)
	}
	for _, bad := range []string{"no stamp", "audit(1.2:3 x=1", "audit(1.2): x=1", "audit(a.2:3): x=1", `audit(1.2:3): path="open`} {
		if _, err := ParseMessage(TypeLandlockAccess, []byte(bad)); err == nil {
			t.Errorf("ParseMessage(%q) accepted a malformed record", bad)
		}
	}
}

func TestOpFor(t *testing.T) {
	tests := []struct {
		blockers string
		op       string
		class    audit.Class
		errno    int
	}{
		{"fs.write_file", "open", audit.ClassFile, 13},
		{"fs.make_reg", "create", audit.ClassFile, 13},
		{"fs.remove_file", "unlink", audit.ClassFile, 13},
		{"fs.make_reg,fs.refer", "rename", audit.ClassFile, 18},
		{"fs.truncate", "truncate", audit.ClassFile, 13},
		{"net.connect_tcp", "connect", audit.ClassNetwork, 13},
		{"scope.signal", "kill", audit.ClassSelfProtection, 1},
		{"fs.future_right", "fs.future_right", audit.ClassFile, 13},
	}
	for _, tt := range tests {
		op, class, errno := opFor(strings.Split(tt.blockers, ","))
		if op != tt.op || class != tt.class || errno != tt.errno {
			t.Errorf("opFor(%s) = %s/%s/%d, want %s/%s/%d", tt.blockers, op, class, errno, tt.op, tt.class, tt.errno)
		}
	}
}

func sessions(m map[int]string) sessionFunc {
	return func(pid int) (string, bool) { s, ok := m[pid]; return s, ok }
}

// TestAssembleWithSyscallContext: records of one event share a serial and
// end with EOE; the acting pid comes from SYSCALL.
func TestAssembleWithSyscallContext(t *testing.T) {
	a := newAssembler(time.Second)
	now := time.Unix(100, 0)
	in := []Message{
		mustParse(t, TypeLandlockAccess, `audit(100.1:5): domain=abc blockers=fs.write_file path="/etc/x" dev="vda" ino=3`),
		mustParse(t, TypeLandlockDomain, `audit(100.1:5): domain=abc status=allocated mode=enforcing pid=40 uid=0 exe="/usr/bin/oxsupervise" comm="oxsupervise"`),
		mustParse(t, TypeSyscall, `audit(100.1:5): arch=c000003e syscall=257 success=no exit=-13 ppid=41 pid=42 uid=1000 comm="touch" exe="/usr/bin/touch" key=(null)`),
		mustParse(t, TypeProctitle, `audit(100.1:5): proctitle=746F756368002F6574632F78`),
		mustParse(t, TypeSyscall, `audit(100.1:6): arch=c000003e syscall=1 success=yes exit=1 pid=99 comm="x" exe="/x"`),
	}
	for _, m := range in {
		if evs := a.add(m, now); len(evs) != 0 {
			t.Fatalf("event completed before EOE: %+v", evs)
		}
	}
	if len(a.pending) != 1 {
		t.Fatalf("%d pending events; the unrelated SYSCALL must not be buffered", len(a.pending))
	}
	evs := a.add(mustParse(t, TypeEOE, `audit(100.1:5): `), now)
	if len(evs) != 1 {
		t.Fatalf("EOE completed %d events, want 1", len(evs))
	}
	recs, unattributed := a.records(evs[0], sessions(map[int]string{42: "s1"}), false)
	if len(recs) != 1 || unattributed != 0 {
		t.Fatalf("records %d unattributed %d", len(recs), unattributed)
	}
	r := recs[0]
	if r.Process.PID != 42 || r.Process.Parent.PID != 41 || r.Process.Name != "touch" || r.Process.CommandLine != "touch /etc/x" ||
		r.User.ID != "1000" || r.File.Path != "/etc/x" || r.File.Inode != 3 || r.Ox.Session != "s1" || r.Ox.Errno != 13 || r.Message != "" {
		t.Fatalf("record %+v %+v %+v %+v", r, r.Process, r.File, r.Ox)
	}
}

// TestAssembleWithoutSyscallContext: with "-a task,never" every record is
// its own event; the pid is unknown, the domain's creator attributes it.
func TestAssembleWithoutSyscallContext(t *testing.T) {
	a := newAssembler(100 * time.Millisecond)
	now := time.Unix(100, 0)
	a.add(mustParse(t, TypeLandlockAccess, `audit(100.1:7): domain=d1 blockers=fs.remove_file path="/w/f" dev="vda" ino=9`), now)
	a.add(mustParse(t, TypeLandlockDomain, `audit(100.1:8): domain=d1 status=allocated mode=enforcing pid=50 uid=0 exe="/usr/bin/oxsupervise" comm="oxsupervise"`), now)
	if evs := a.expire(now.Add(50 * time.Millisecond)); len(evs) != 0 {
		t.Fatalf("flushed %d events before the timeout", len(evs))
	}
	evs := a.expire(now.Add(150 * time.Millisecond))
	if len(evs) != 2 {
		t.Fatalf("timeout flushed %d events, want 2", len(evs))
	}
	recs, _ := a.records(evs[0], sessions(map[int]string{50: "s2"}), false)
	if len(recs) != 1 {
		t.Fatalf("got %d records", len(recs))
	}
	r := recs[0]
	if r.Process != nil || r.Ox.Session != "s2" || r.Event.Action != "unlink" || !strings.Contains(r.Message, "pid 50") {
		t.Fatalf("record %+v (process %+v)", r, r.Process)
	}
	if recs, _ := a.records(evs[1], sessions(nil), false); len(recs) != 0 {
		t.Fatalf("a domain-only event produced %d records", len(recs))
	}
}

func TestAssembleUnattributedAndNetwork(t *testing.T) {
	a := newAssembler(time.Millisecond)
	now := time.Unix(100, 0)
	a.add(mustParse(t, TypeLandlockAccess, `audit(100.1:9): domain=d2 blockers=net.connect_tcp daddr=::ffff:10.0.0.1 dest=443`), now)
	evs := a.expire(now.Add(time.Second))
	if recs, n := a.records(evs[0], sessions(nil), false); len(recs) != 0 || n != 1 {
		t.Fatalf("unattributed refusal: %d records, %d counted; want 0 and 1", len(recs), n)
	}
	recs, _ := a.records(evs[0], sessions(nil), true)
	if len(recs) != 1 {
		t.Fatal("KeepUnattributed dropped the record")
	}
	d := recs[0].Destination
	if d == nil || d.IP.String() != "10.0.0.1" || d.Port != 443 || recs[0].Network.Type != "ipv4" || recs[0].Ox.Class != audit.ClassNetwork {
		t.Fatalf("destination %+v network %+v", d, recs[0].Network)
	}
}

// TestAttributionSurvivesLostDomainRecord: the domain's allocation record
// comes once, with its first refusal, and the kernel may drop it in a
// flood. A refusal attributed through a live pid then teaches the
// assembler whose domain it is, so later refusals of that domain whose
// acting process has exited (or whose SYSCALL record was dropped) are
// still the session's rather than silently unattributed.
func TestAttributionSurvivesLostDomainRecord(t *testing.T) {
	a := newAssembler(time.Millisecond)
	now := time.Unix(100, 0)
	a.add(mustParse(t, TypeLandlockAccess, `audit(100.1:20): domain=d9 blockers=fs.write_file path="/etc/x" dev="vda" ino=3`), now)
	a.add(mustParse(t, TypeSyscall, `audit(100.1:20): arch=c000003e syscall=257 success=no exit=-13 ppid=1 pid=70 uid=0 comm="w" exe="/w"`), now)
	a.add(mustParse(t, TypeLandlockAccess, `audit(100.2:21): domain=d9 blockers=fs.write_file path="/etc/y" dev="vda" ino=4`), now)
	evs := a.expire(now.Add(time.Second))
	if len(evs) != 2 {
		t.Fatalf("flushed %d events, want 2", len(evs))
	}
	alive := sessions(map[int]string{70: "s9"})
	if recs, _ := a.records(evs[0], alive, false); len(recs) != 1 || recs[0].Ox.Session != "s9" {
		t.Fatalf("first refusal: %+v", recs)
	}
	// pid 70 has exited: no pid map, no cgroup, no domain record.
	recs, unattributed := a.records(evs[1], sessions(nil), false)
	if unattributed != 0 || len(recs) != 1 || recs[0].Ox.Session != "s9" {
		t.Fatalf("refusal without pid: %d records (%+v), %d unattributed; want it attributed to s9 through its domain", len(recs), recs, unattributed)
	}
}

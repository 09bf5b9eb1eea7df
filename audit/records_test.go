package audit

import (
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

func TestSessionRecordsCarryPolicyDigest(t *testing.T) {
	compiled := &policy.Compiled{SchemaVersion: policy.CompiledSchemaVersion, Mode: policy.ModeReadOnly}
	want, err := compiled.Digest()
	if err != nil {
		t.Fatal(err)
	}
	start, err := SessionStart("s1", compiled, &Process{PID: 7})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := SessionStop("s1", compiled, "command exited with status 3")
	if err != nil {
		t.Fatal(err)
	}
	enc := NewEncoder(nil)
	for _, r := range []*Record{start, stop} {
		line, err := enc.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeStrict(line)
		if err != nil {
			t.Fatal(err)
		}
		if back.Ox.PolicyDigest != want || !strings.HasPrefix(want, "sha256:") || back.Ox.Mode != "read-only" || back.Ox.Session != "s1" {
			t.Fatalf("%s record: %+v, want digest %s", r.Ox.Kind, back.Ox, want)
		}
	}
	if stop.Ox.Kind != KindSessionStop || stop.Message == "" || start.Event.Type[0] != "start" {
		t.Fatalf("kinds: start %+v stop %+v", start.Event, stop.Ox)
	}
	if _, err := SessionStart("s1", nil, nil); err == nil {
		t.Fatal("SessionStart without a policy succeeded")
	}
}

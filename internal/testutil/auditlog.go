package testutil

import (
	"bytes"
	"os"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
)

// AuditRecords reads the JSON-lines audit log at path, failing t on a
// record that does not decode (a test that reads the log trusts nothing
// it could not parse).
func AuditRecords(t testing.TB, path string) []audit.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		r, err := audit.Decode(line)
		if err != nil {
			t.Fatalf("audit record %s: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

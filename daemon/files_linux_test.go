//go:build linux

package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func writeFile(t *testing.T, path, content string, uid int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Dir(path), uid, uid)
	os.Chown(path, uid, uid)
}

func fileOwner(t *testing.T, path string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return int(st.Uid)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// auditRecords returns the audit log's records.
func auditRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func oxField(r map[string]any, key string) any {
	ox, _ := r["oxsupervise"].(map[string]any)
	return ox[key]
}

func itoa(n int) string { return strconv.Itoa(n) }

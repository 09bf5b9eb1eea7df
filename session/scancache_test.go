//go:build linux

package session_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestScanCacheNextSessionSeesNewEntries: sessions in one workspace share
// the start's scan cache (the workspace walked once, for protected entries
// and deny-read globs together). A protected directory and a .env file
// created after a session, in a directory the cache remembers and whose
// times are then set back, are protected and hidden in the next session,
// and their content on the host is untouched.
func TestScanCacheNextSessionSeesNewEntries(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	deep := filepath.Join(e.ws, "sub", "deep")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(deep, "main.go"), "package main\n")
	mustWrite(t, filepath.Join(e.ws, ".env"), "FIRST_SECRET\n")
	// Past the scan cache's racy window, so the first session's walk is
	// remembered and the next one uses it.
	time.Sleep(1100 * time.Millisecond)
	first := e.runOps(t, "workspace-write", []op{{"file-read", "read file.txt", ok}},
		`printf 'dotenv='; cat .env | tr -d '\n'; echo`)
	if first["dotenv"] != "" {
		t.Fatalf("the first session read .env: %q", first["dotenv"])
	}
	mustWrite(t, filepath.Join(deep, ".env.new"), "NEW_SECRET\n")
	if err := os.Mkdir(filepath.Join(deep, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(deep, ".claude", "settings.json"), "{}\n")
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(deep, old, old); err != nil {
		t.Fatal(err)
	}
	got := e.runOps(t, "workspace-write", []op{
		{"new-claude-write", "append sub/deep/.claude/settings.json", readOnly},
		{"new-claude-create", "write sub/deep/.claude/hooks.json", readOnly},
	}, `printf 'dotenv-new='; cat sub/deep/.env.new | tr -d '\n'; echo`,
		`printf 'dotenv-old='; cat .env | tr -d '\n'; echo`)
	if got["dotenv-new"] != "" || got["dotenv-old"] != "" {
		t.Errorf(".env content seen in the next session: new %q, old %q", got["dotenv-new"], got["dotenv-old"])
	}
	for p, want := range map[string]string{
		filepath.Join(deep, ".env.new"):                 "NEW_SECRET\n",
		filepath.Join(e.ws, ".env"):                     "FIRST_SECRET\n",
		filepath.Join(deep, ".claude", "settings.json"): "{}\n",
	} {
		if got := mustRead(t, p); got != want {
			t.Errorf("%s changed on the host: %q", p, got)
		}
	}
	if exists(filepath.Join(deep, ".claude", "hooks.json")) {
		t.Error("a file was created in the new .claude directory")
	}
}

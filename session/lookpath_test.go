package session

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"tool": 0o755, "plain": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tests := []struct {
		name, file string
		env        []string
		want       string // "" = not found
	}{
		{"in PATH", "tool", []string{"PATH=/nonexistent:" + dir}, filepath.Join(dir, "tool")},
		{"last PATH wins", "tool", []string{"PATH=/nonexistent", "PATH=" + dir}, filepath.Join(dir, "tool")},
		{"not executable", "plain", []string{"PATH=" + dir}, ""},
		{"directory", "sub", []string{"PATH=" + dir}, ""},
		{"slash kept", "./tool", []string{"PATH=/nonexistent"}, "./tool"},
		// The test runs in dir (t.Chdir below), so "." and "" would find it.
		{"relative entry skipped", "tool", []string{"PATH=.::sub/.."}, ""},
		{"default PATH", "sh", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LookPath(tt.file, tt.env)
			if tt.name == "default PATH" {
				// sh is in one of DefaultPath's directories on every Linux.
				if err != nil || filepath.Base(got) != "sh" || !filepath.IsAbs(got) {
					t.Errorf("LookPath(sh, no PATH) = %q, %v", got, err)
				}
				return
			}
			if tt.want == "" {
				if err == nil {
					t.Errorf("LookPath(%q) = %q, want not found", tt.file, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("LookPath(%q) = %q, %v; want %q", tt.file, got, err, tt.want)
			}
		})
	}
}

package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, file, want, err string
	}{
		{"off by default", "", "", ""},
		{"loopback", "[metrics]\nlisten = \"127.0.0.1:9464\"\n", "127.0.0.1:9464", ""},
		{"ipv6", "[metrics]\nlisten = \"[::1]:9464\"\n", "[::1]:9464", ""},
		{"no port", "[metrics]\nlisten = \"127.0.0.1\"\n", "", "policy.toml:2:10"},
		{"hostname", "[metrics]\nlisten = \"metrics.example.com:9464\"\n", "", "IP literal"},
		{"port range", "[metrics]\n\nlisten = \"127.0.0.1:70000\"\n", "", "policy.toml:3:10"},
		{"type", "[metrics]\nlisten = 9464\n", "", "policy.toml:2"},
		{"unknown key", "[metrics]\nport = 9464\n", "", "policy.toml:2:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := LoadMetrics(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LoadMetrics: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || m.Listen != tc.want {
				t.Fatalf("LoadMetrics = %+v, %v; want listen %q", m, err, tc.want)
			}
		})
	}
}

package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadObservability(t *testing.T) {
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
		{"otlp", "[audit.otlp]\nendpoint = \"http://127.0.0.1:4318\"\n", "otlp=http://127.0.0.1:4318", ""},
		{"otlp dotted", "[audit]\notlp.endpoint = \"https://c.example:4318/v1/logs\"\n", "otlp=https://c.example:4318/v1/logs", ""},
		{"otlp scheme", "[audit.otlp]\nendpoint = \"udp://127.0.0.1:4318\"\n", "", "policy.toml:2:12"},
		{"otlp unknown key", "[audit.otlp]\nendpoints = \"http://x:1\"\n", "", "policy.toml:2:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := LoadObservability(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LoadObservability: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			got := m.MetricsListen
			if strings.HasPrefix(tc.want, "otlp=") {
				got = "otlp=" + m.OTLPEndpoint
			}
			if err != nil || got != tc.want {
				t.Fatalf("LoadObservability = %+v, %v; want %q", m, err, tc.want)
			}
		})
	}
}

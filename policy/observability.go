package policy

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// The daemon's observability keys. They are read by the daemon from the
// managed files only (LoadMetrics); in a user's or workspace's file they
// are accepted and have no effect.
//
//	[metrics]
//	listen = "127.0.0.1:9464"   # Prometheus endpoint; "" (default) = off
func observabilitySchema() map[string]keySpec {
	return map[string]keySpec{
		"metrics.listen": {kind: kindString, tighten: tightenEqual, check: checkListen,
			hint: `an IP address and port to serve Prometheus metrics on, e.g. "127.0.0.1:9464"; "" = off`},
	}
}

func observabilityDefaults() map[string]any {
	return map[string]any{
		"metrics.listen": "",
	}
}

// checkListen accepts "" (off) or IP:port with a literal address
// ("localhost" too), so that the daemon never resolves a name to decide
// where it listens.
func checkListen(s string) error {
	if s == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("%q: the address must be an IP literal or localhost", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
	}
	return nil
}

// Metrics is the daemon's Prometheus endpoint setting.
type Metrics struct {
	// Listen is the address to serve /metrics on; "" means off.
	Listen string
	// Source is where Listen was set ("file:line:col" or "default").
	Source string
}

// LoadMetrics reads [metrics] from the managed policy in managedDir
// (DefaultManagedDir when ""), with the loader's checks: a bad value is
// an error naming file:line:col. Users' and workspaces' files are not
// read.
func LoadMetrics(managedDir string) (Metrics, error) {
	empty, err := os.MkdirTemp("", "oxsupervise-managed-")
	if err != nil {
		return Metrics{}, err
	}
	defer os.RemoveAll(empty)
	if managedDir == "" {
		managedDir = DefaultManagedDir
	}
	_, eff, err := Load(LoadOptions{ManagedDir: managedDir, Home: empty, Workspace: empty, Env: func(string) string { return "" }})
	if err != nil {
		return Metrics{}, err
	}
	for _, v := range eff.Values {
		if v.Key == "metrics.listen" {
			return Metrics{Listen: v.Value.(string), Source: v.Source}, nil
		}
	}
	return Metrics{}, fmt.Errorf("metrics.listen missing from the effective policy")
}

package policy

import (
	"strings"
	"testing"
)

// TestResolverKeys covers the resolver keys of [network]: unknown_hosts,
// ask_timeout_seconds and max_ttl_seconds, their defaults, their bounds and
// how managed locks clamp them.
func TestResolverKeys(t *testing.T) {
	tests := []struct {
		name    string
		managed string
		user    string
		// errHas is a substring of the expected error ("" = must load).
		errHas string
		check  func(t *testing.T, n Network)
	}{
		{name: "defaults", check: func(t *testing.T, n Network) {
			if n.UnknownHosts != UnknownHostsDeny || n.AskTimeoutSeconds != DefaultAskTimeoutSeconds || n.MaxTTLSeconds != DefaultMaxTTLSeconds {
				t.Errorf("network %+v", n)
			}
		}},
		{name: "ask with timeout and cap", user: "[network]\nunknown_hosts = \"ask\"\nask_timeout_seconds = 12\nmax_ttl_seconds = 60\n", check: func(t *testing.T, n Network) {
			if n.UnknownHosts != UnknownHostsAsk || n.AskTimeoutSeconds != 12 || n.MaxTTLSeconds != 60 {
				t.Errorf("network %+v", n)
			}
		}},
		{name: "unknown value", user: "[network]\nunknown_hosts = \"allow\"\n", errHas: "unknown_hosts"},
		{name: "zero timeout", user: "[network]\nask_timeout_seconds = 0\n", errHas: "must be between 1 and 600"},
		{name: "huge timeout", user: "[network]\nask_timeout_seconds = 601\n", errHas: "must be between 1 and 600"},
		{name: "locked deny refuses ask", managed: "[network]\nunknown_hosts = \"deny\"\n[managed]\nlocked = [\"network.unknown_hosts\"]\n",
			user: "[network]\nunknown_hosts = \"ask\"\n", errHas: "network.unknown_hosts is locked"},
		{name: "locked ask allows deny", managed: "[network]\nunknown_hosts = \"ask\"\n[managed]\nlocked = [\"network.unknown_hosts\"]\n",
			user: "[network]\nunknown_hosts = \"deny\"\n", check: func(t *testing.T, n Network) {
				if n.UnknownHosts != UnknownHostsDeny {
					t.Errorf("unknown_hosts %q", n.UnknownHosts)
				}
			}},
		{name: "locked cap refuses raise", managed: "[network]\nmax_ttl_seconds = 600\n[managed]\nlocked = [\"network.max_ttl_seconds\"]\n",
			user: "[network]\nmax_ttl_seconds = 86400\n", errHas: "only lower the limit"},
		{name: "locked cap refuses no cap", managed: "[network]\nmax_ttl_seconds = 600\n[managed]\nlocked = [\"network.max_ttl_seconds\"]\n",
			user: "[network]\nmax_ttl_seconds = 0\n", errHas: "only lower the limit"},
		{name: "locked cap allows lower", managed: "[network]\nmax_ttl_seconds = 600\n[managed]\nlocked = [\"network.max_ttl_seconds\"]\n",
			user: "[network]\nmax_ttl_seconds = 60\n", check: func(t *testing.T, n Network) {
				if n.MaxTTLSeconds != 60 {
					t.Errorf("max_ttl_seconds %d", n.MaxTTLSeconds)
				}
			}},
		{name: "locked timeout refuses longer", managed: "[network]\nask_timeout_seconds = 10\n[managed]\nlocked = [\"network.ask_timeout_seconds\"]\n",
			user: "[network]\nask_timeout_seconds = 300\n", errHas: "only lower the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.managed != "" {
				f.write(t, "etc/policy.toml", tt.managed)
			}
			f.write(t, "home/.openoxide/config.toml", tt.user)
			c, _, _, err := f.load(t)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("want an error containing %q, got %v", tt.errHas, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c.Network)
		})
	}
}

package policy

import (
	"strings"
	"testing"
)

func TestCapabilities(t *testing.T) {
	f := newFixture(t)
	c, _, _ := f.mustLoad(t)
	if len(c.Capabilities) != 0 {
		t.Errorf("default policy keeps capabilities %v, want none", c.Capabilities)
	}
	p := f.write(t, "ws/caps.toml", "[sandbox]\ncapabilities = [\"CAP_NET_BIND_SERVICE\", \"CAP_CHOWN\"]\n")
	c, _, _ = f.mustLoad(t, "--config", p)
	if got := strings.Join(c.CapabilityNames(), ","); got != "CAP_CHOWN,CAP_NET_BIND_SERVICE" {
		t.Errorf("capabilities %s, want CAP_CHOWN,CAP_NET_BIND_SERVICE", got)
	}
	for _, cp := range c.Capabilities {
		if cp.Reason == "" || !strings.HasPrefix(cp.Source, p+":2:") {
			t.Errorf("%s: reason %q, source %q; want a reason and %s:2:col", cp.Name, cp.Reason, cp.Source, p)
		}
	}
	// A capability that undoes a layer is not grantable, with the list
	// of those that are in the hint.
	bad := f.write(t, "ws/bad.toml", "[sandbox]\ncapabilities = [\"CAP_SYS_ADMIN\"]\n")
	_, _, _, err := f.load(t, "--config", bad)
	if err == nil || !strings.Contains(err.Error(), bad+":2:17") || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") || !strings.Contains(err.Error(), "CAP_NET_BIND_SERVICE") {
		t.Errorf("CAP_SYS_ADMIN: error %v; want it refused at %s:2:17 with the grantable ones listed", err, bad)
	}
}

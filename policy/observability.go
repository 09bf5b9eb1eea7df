package policy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// The daemon's observability keys. They are read by the daemon from the
// managed files only (LoadMetrics); in a user's or workspace's file they
// are accepted and have no effect.
//
//	[metrics]
//	listen = "127.0.0.1:9464"               # Prometheus endpoint; "" (default) = off
//	[audit.otlp]
//	endpoint = "http://collector:4318"      # OTLP/HTTP logs; "" (default) = off
func observabilitySchema() map[string]keySpec {
	return map[string]keySpec{
		"metrics.listen": {kind: kindString, tighten: tightenEqual, check: checkListen,
			hint: `an IP address and port to serve Prometheus metrics on, e.g. "127.0.0.1:9464"; "" = off`},
		"audit.otlp.endpoint": {kind: kindString, tighten: tightenEqual, check: checkOTLPEndpoint,
			hint: `the collector's OTLP/HTTP URL, e.g. "http://127.0.0.1:4318" (/v1/logs is added when the URL has no path); "" = off`},
	}
}

func observabilityDefaults() map[string]any {
	return map[string]any{
		"metrics.listen":      "",
		"audit.otlp.endpoint": "",
	}
}

// checkOTLPEndpoint accepts "" (off) or an http(s) URL with a host.
func checkOTLPEndpoint(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http:// or https:// URL with a host", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: no credentials, query or fragment in the URL", s)
	}
	return nil
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

// Observability is the daemon's own observability settings.
type Observability struct {
	// MetricsListen is the address to serve /metrics on; "" means off.
	MetricsListen string
	// OTLPEndpoint is the collector audit records are exported to; ""
	// means off.
	OTLPEndpoint string
	// Sources say where each was set ("file:line:col" or "default").
	MetricsSource, OTLPSource string
}

// LoadObservability reads [metrics] and [audit.otlp] from the managed
// policy in managedDir (DefaultManagedDir when ""), with the loader's
// checks: a bad value is an error naming file:line:col. Users' and
// workspaces' files are not read.
func LoadObservability(managedDir string) (Observability, error) {
	empty, err := os.MkdirTemp("", "oxsupervise-managed-")
	if err != nil {
		return Observability{}, err
	}
	defer os.RemoveAll(empty)
	if managedDir == "" {
		managedDir = DefaultManagedDir
	}
	// The resolve step has every value; binding (a scan of the empty
	// workspace, git config lookups) would add nothing to them.
	_, eff, err := Resolve(LoadOptions{ManagedDir: managedDir, Home: empty, Workspace: empty, Env: func(string) string { return "" }})
	if err != nil {
		return Observability{}, err
	}
	var o Observability
	for _, v := range eff.Values {
		switch v.Key {
		case "metrics.listen":
			o.MetricsListen, o.MetricsSource = v.Value.(string), v.Source
		case "audit.otlp.endpoint":
			o.OTLPEndpoint, o.OTLPSource = v.Value.(string), v.Source
		}
	}
	return o, nil
}

// hasSubtable reports whether the schema has keys below table (three-part
// keys such as audit.otlp.endpoint below audit.otlp).
func hasSubtable(sch map[string]keySpec, table string) bool {
	for k := range sch {
		if strings.HasPrefix(k, table+".") {
			return true
		}
	}
	return false
}

// decodeSubtable decodes the keys of a table below a top-level table.
func (d *doc) decodeSubtable(l *layer, sch map[string]keySpec, path []string, tbl map[string]any) error {
	table := strings.Join(path, ".")
	var known []string
	for k := range sch {
		if strings.HasPrefix(k, table+".") {
			known = append(known, strings.TrimPrefix(k, table+"."))
		}
	}
	for _, key := range sortedKeys(tbl) {
		p := append(append([]string{}, path...), key)
		spec, ok := sch[table+"."+key]
		if !ok {
			return d.unknownKey(p, known)
		}
		s, err := d.decodeValue(p, spec, tbl[key])
		if err != nil {
			return err
		}
		l.settings[table+"."+key] = s
	}
	return nil
}

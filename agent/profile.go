package agent

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Profile is what one agent's process needs. Every entry carries the
// documentation or source it was taken from.
type Profile struct {
	// Name is the profile's name in policy files and on the command line
	// ([agent.NAME.profile], --agent NAME).
	Name string `json:"name"`
	// Title is the agent's own name, for humans.
	Title string `json:"title"`
	// Commands are the executable names that select the profile.
	Commands []string `json:"commands"`
	// Packages are the npm (or PyPI) packages the agent ships in; a
	// command run through npx, or `node .../node_modules/PKG/...`, selects
	// the profile too.
	Packages []string `json:"packages"`
	// Checked lists the agent versions the profile was checked against by
	// running them (doctor compares the installed version with it); empty
	// for a profile taken from documentation only.
	Checked []string `json:"checked_versions"`

	// Hosts are the provider and login endpoints, "host:port".
	Hosts []Entry `json:"hosts"`
	// Credentials are environment names (globs) passed through the scrub.
	Credentials []Entry `json:"credentials"`
	// Env are variables set for the agent ("NAME=value"): its switches for
	// non-essential traffic and for its own sandbox.
	Env []Entry `json:"env,omitempty"`
	// Args are inserted after the command's name when the agent has no
	// environment switch for something (Codex's sandbox mode).
	Args []Entry `json:"args,omitempty"`
	// State is written by the agent outside the workspace: "~/..." paths,
	// directories unless they end in a file name listed in StateFiles.
	State []Entry `json:"state"`
	// StateFiles are the State entries that are files, with the content a
	// missing one is created with (noCreate: left missing, and then not
	// granted, since a kernel rule needs an existing inode).
	StateFiles map[string]string `json:"-"`
	// Rules are read-only to the agent: "~/..." or absolute paths, or a
	// bare name protected at any depth below every writable root (a
	// project's own rule file).
	Rules []Entry `json:"rules"`

	// Endpoints returns the base URLs the agent will use, from its own
	// settings (environment, command line, config files), or nil for its
	// defaults (Hosts).
	Endpoints func(in Inputs) []Entry `json:"-"`
	// Guarded are the keys of a state file that start programs, rolled
	// back after the session (see Guard).
	Guarded []GuardedFile
}

// Entry is one value of a profile with the reason it is there.
type Entry struct {
	Value string `json:"value"`
	// Cite is the documentation URL or "repo:path" it was taken from.
	Cite string `json:"cite"`
}

// GuardedFile names a JSON state file and the keys in it that start
// programs.
type GuardedFile struct {
	// Path is "~/..." .
	Path string `json:"path"`
	// Keys are top-level keys; ProjectKeys are keys inside each value of
	// the top-level "projects" object.
	Keys        []string `json:"keys"`
	ProjectKeys []string `json:"project_keys,omitempty"`
	Cite        string   `json:"cite"`
}

// Inputs are what a profile's settings depend on.
type Inputs struct {
	Argv []string
	Env  func(string) string
	Home string
	// ReadFile reads a file the agent reads (its config); nil means none.
	ReadFile func(path string) ([]byte, error)
}

// Source names the profile as the origin of a value, as files name
// file:line.
func (p *Profile) Source() string { return "profile " + p.Name + " (built in)" }

// Grants are a profile's values after its settings were read, each with
// its origin, ready for the policy layer.
type Grants struct {
	Profile string
	// NetAllow are network.allow entries ("host:port", "127.0.0.1:PORT").
	NetAllow []Grant
	// Passthrough are env.passthrough globs.
	Passthrough []Grant
	// SetEnv are "NAME=value".
	SetEnv []Grant
	// Args are inserted after argv[0].
	Args []Grant
	// Writable are absolute paths; WritableFiles says which are files.
	Writable      []Grant
	WritableFiles map[string]bool
	// ReadOnly are absolute paths, or names protected at any depth.
	ReadOnly []Grant
}

// Grant is one value with its source ("profile NAME (built in): CITE").
type Grant struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Grants evaluates the profile for one command line and user.
func (p *Profile) Grants(in Inputs) (*Grants, error) {
	if in.Env == nil {
		in.Env = func(string) string { return "" }
	}
	g := &Grants{Profile: p.Name, WritableFiles: map[string]bool{}}
	src := func(e Entry) string { return p.Source() + ": " + e.Cite }
	hosts := p.Hosts
	if p.Endpoints != nil {
		for _, e := range p.Endpoints(in) {
			hp, err := HostPort(e.Value)
			if err != nil {
				return nil, fmt.Errorf("agent %s: base URL %q (%s): %w", p.Name, e.Value, e.Cite, err)
			}
			for _, h := range hp {
				g.NetAllow = appendGrant(g.NetAllow, Grant{h, src(e)})
			}
		}
	}
	for _, e := range hosts {
		g.NetAllow = appendGrant(g.NetAllow, Grant{e.Value, src(e)})
	}
	for _, e := range p.Credentials {
		g.Passthrough = appendGrant(g.Passthrough, Grant{e.Value, src(e)})
	}
	for _, e := range p.Env {
		g.SetEnv = append(g.SetEnv, Grant{e.Value, src(e)})
	}
	for _, e := range p.Args {
		g.Args = append(g.Args, Grant{e.Value, src(e)})
	}
	for _, e := range p.State {
		abs := Expand(e.Value, in.Home)
		g.Writable = appendGrant(g.Writable, Grant{abs, src(e)})
		if _, ok := p.StateFiles[e.Value]; ok {
			g.WritableFiles[abs] = true
		}
	}
	for _, e := range p.Rules {
		v := e.Value
		if strings.HasPrefix(v, "~") {
			v = Expand(v, in.Home)
		}
		g.ReadOnly = appendGrant(g.ReadOnly, Grant{v, src(e)})
	}
	return g, nil
}

func appendGrant(list []Grant, g Grant) []Grant {
	if slices.ContainsFunc(list, func(o Grant) bool { return o.Value == g.Value }) {
		return list
	}
	return append(list, g)
}

// Expand turns "~/x" into an absolute path below home.
func Expand(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// HostPort turns a base URL into the network.allow entries that admit it:
// "host:port" for a name, "IP:port" for an address. "localhost" admits
// both loopback addresses, since the agent's resolver may pick either.
func HostPort(base string) ([]string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("no host")
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	if strings.EqualFold(host, "localhost") {
		return []string{"127.0.0.1:" + port, "[::1]:" + port}, nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return []string{"[" + ip.String() + "]:" + port}, nil
	}
	return []string{strings.ToLower(host) + ":" + port}, nil
}

// All returns every built-in profile, sorted by name.
func All() []*Profile {
	list := []*Profile{claudeCode(), codex(), openCode(), aider()}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

// Lookup returns the built-in profile called name.
func Lookup(name string) (*Profile, bool) {
	for _, p := range All() {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Names lists the built-in profiles' names.
func Names() []string {
	var out []string
	for _, p := range All() {
		out = append(out, p.Name)
	}
	return out
}

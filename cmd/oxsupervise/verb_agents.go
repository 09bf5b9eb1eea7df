package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/agent"
)

// cmdAgents lists the built-in agent profiles and what each grants, with
// the documentation or source every entry was taken from.
func cmdAgents(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("agents", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise agents [--json] [NAME...]")
		fmt.Fprintln(fs.Output(), "\nList the built-in agent profiles (what `run -- claude|codex|opencode|aider` grants the agent),")
		fmt.Fprintln(fs.Output(), "each entry with its source. Override them in policy files under [agent.NAME.profile].")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "agents", args); done {
		return code
	}
	var list []*agent.Profile
	if fs.NArg() == 0 {
		list = agent.All()
	}
	for _, name := range fs.Args() {
		p, ok := agent.Lookup(name)
		if !ok {
			fmt.Fprintf(s.err, "oxsupervise agents: no built-in profile %q (profiles: %s)\n", name, strings.Join(agent.Names(), ", "))
			return exitUsage
		}
		list = append(list, p)
	}
	if *asJSON {
		type jsonProfile struct {
			*agent.Profile
			// DefaultEndpoints are the model API endpoints when the
			// agent's base-URL settings are unset.
			DefaultEndpoints []agent.Entry     `json:"default_endpoints,omitempty"`
			Installed        []agent.Installed `json:"installed,omitempty"`
		}
		var out []jsonProfile
		found := agent.Find(os.Getenv("PATH"))
		for _, p := range list {
			jp := jsonProfile{Profile: p, DefaultEndpoints: defaultEndpoints(p)}
			for _, in := range found {
				if in.Profile == p.Name {
					jp.Installed = append(jp.Installed, in)
				}
			}
			out = append(out, jp)
		}
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(s.err, "oxsupervise agents: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	for i, p := range list {
		if i > 0 {
			fmt.Fprintln(s.out)
		}
		writeProfile(s.out, p)
	}
	return exitOK
}

func defaultEndpoints(p *agent.Profile) []agent.Entry {
	if p.Endpoints == nil {
		return nil
	}
	return p.Endpoints(agent.Inputs{Env: func(string) string { return "" }})
}

func writeProfile(w io.Writer, p *agent.Profile) {
	checked := "checked against " + strings.Join(p.Checked, ", ")
	if len(p.Checked) == 0 {
		checked = "from its documentation only, not checked against a running version"
	}
	fmt.Fprintf(w, "%s — %s (commands: %s; packages: %s; %s)\n", p.Name, p.Title,
		strings.Join(p.Commands, ", "), strings.Join(p.Packages, ", "), checked)
	section := func(title string, entries []agent.Entry) {
		if len(entries) == 0 {
			return
		}
		fmt.Fprintf(w, "  %s:\n", title)
		for _, e := range entries {
			fmt.Fprintf(w, "    %-44s %s\n", e.Value, e.Cite)
		}
	}
	section("model API (default; follows the agent's base-URL settings)", defaultEndpoints(p))
	section("login hosts", p.Hosts)
	section("credentials passed through", p.Credentials)
	section("environment set", p.Env)
	section("arguments added", p.Args)
	section("state, writable", p.State)
	section("rules, read-only", p.Rules)
	for _, g := range p.Guarded {
		fmt.Fprintf(w, "  rolled back after the session: %s keys %s, projects.*.%s   %s\n", g.Path,
			strings.Join(g.Keys, ", "), strings.Join(g.ProjectKeys, "|"), g.Cite)
	}
}

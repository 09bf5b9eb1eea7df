package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/policy"
)

// cmdPolicy implements `policy show` and `policy check`. Both read the same
// layers as run; OXSUPERVISE_MANAGED_DIR points them at another managed
// directory than /etc/oxsupervise (used by tests and for dry runs of a
// managed policy before installing it).
func cmdPolicy(ctx context.Context, s streams, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(s.err, "usage: oxsupervise policy show [--bind] [--json] | policy check --tool T --input S [--agent A] [--json]")
		return exitUsage
	}
	switch args[0] {
	case "show":
		return cmdPolicyShow(s, args[1:])
	case "check":
		return cmdPolicyCheck(s, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(s.out, "usage: oxsupervise policy show [--bind] [--json] | policy check --tool T --input S [--agent A] [--json]")
		return exitOK
	}
	fmt.Fprintf(s.err, "oxsupervise policy: unknown subcommand %q (want show or check)\n", args[0])
	return exitUsage
}

func policyFlagSet(name string, s streams) (*pflag.FlagSet, *policy.Flags, *bool) {
	fs := pflag.NewFlagSet("policy "+name, pflag.ContinueOnError)
	fs.SetOutput(s.err)
	pf := policy.RegisterFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	return fs, pf, asJSON
}

func parsePolicyFlags(fs *pflag.FlagSet, s streams, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(s.out)
			fs.PrintDefaults()
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return 0, true
}

// policyOptions are the load options of the policy verbs; argv is the
// command whose agent profile `policy show -- CMD` shows.
func policyOptions(pf *policy.Flags, warn io.Writer, argv ...string) policy.LoadOptions {
	return policy.LoadOptions{
		ManagedDir: os.Getenv(policy.ManagedDirEnv),
		Flags:      pf,
		Warn:       warn,
		Argv:       argv,
	}
}

// cmdPolicyShow prints the resolved policy: every effective value and where
// it came from, without looking at the paths it names. --bind also binds it
// as a session started here would (paths resolved, writable roots scanned
// for protected entries) and prints the compiled policy and its digest.
// `policy show -- CMD...` (or --agent NAME) shows the policy with the agent
// profile that command would get.
func cmdPolicyShow(s streams, args []string) int {
	fs, pf, asJSON := policyFlagSet("show", s)
	policy.RegisterAgentFlag(fs, pf)
	bind := fs.Bool("bind", false, "also resolve the paths and scan the writable roots as a session would, and print the compiled policy")
	var argv []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, argv = args[:i], args[i+1:]
	}
	if code, ok := parsePolicyFlags(fs, s, args); !ok {
		return code
	}
	r, eff, err := policy.Resolve(policyOptions(pf, s.err, argv...))
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise policy show: %v\n", err)
		return exitFail
	}
	var c *policy.Compiled
	var digest string
	if *bind {
		if c, err = r.Bind(); err == nil {
			digest, err = c.Digest()
		}
		if err != nil {
			fmt.Fprintf(s.err, "oxsupervise policy show: %v\n", err)
			return exitFail
		}
	}
	if *asJSON {
		out := struct {
			Digest    string            `json:"digest,omitempty"`
			Effective *policy.Effective `json:"effective"`
			Compiled  *policy.Compiled  `json:"compiled,omitempty"`
		}{digest, eff, c}
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(s.err, "oxsupervise policy show: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	writeEffective(s.out, eff)
	if c == nil {
		fmt.Fprintln(s.out, "# paths not resolved; --bind resolves them and scans the writable roots as a session would")
		return exitOK
	}
	writeCompiled(s.out, c, digest)
	return exitOK
}

// writeEffective prints what the resolve step decided.
func writeEffective(w io.Writer, eff *policy.Effective) {
	fmt.Fprintln(w, "# files (lowest precedence first)")
	if len(eff.Files) == 0 {
		fmt.Fprintln(w, "#   (none)")
	}
	for _, f := range eff.Files {
		fmt.Fprintf(w, "#   %s\n", f)
	}
	fmt.Fprintln(w, "# effective values")
	for _, v := range eff.Values {
		b, _ := json.Marshal(v.Value)
		lock := ""
		if v.Locked {
			lock = " [locked]"
		}
		fmt.Fprintf(w, "%s = %s  # %s%s\n", v.Key, b, v.Source, lock)
	}
}

// writeCompiled prints the bound policy a session would get.
func writeCompiled(w io.Writer, c *policy.Compiled, digest string) {
	fmt.Fprintln(w, "# compiled")
	fmt.Fprintf(w, "mode = %s, approval = %s, filesystem rules = %t, read access = %s\n", c.Mode, c.Approval, c.FilesystemRules, c.ReadAccess)
	anchors := func(title string, as []policy.Anchor) {
		fmt.Fprintf(w, "%s:\n", title)
		for _, a := range as {
			state := ""
			if !a.Exists {
				state = " (does not exist)"
			}
			fmt.Fprintf(w, "  %s%s  # %s\n", a.Path, state, a.Source)
		}
	}
	anchors("writable roots", c.WritableRoots)
	if c.ReadAccess == policy.ReadAccessRestricted {
		anchors("readable roots", c.ReadableRoots)
	}
	fmt.Fprintln(w, "protected patterns:")
	for _, p := range c.ProtectedPatterns {
		kind := string(p.Type)
		if p.CheckedAtEnd {
			// A session may create one; it is checked when the session ends.
			kind += ", created: checked at end"
		}
		fmt.Fprintf(w, "  %s (%s): %s  # %s\n", strings.Join(p.Components, "/"), kind, p.Reason, p.Source)
	}
	anchors("protected paths", c.ProtectedPaths)
	anchors("deny read", c.DenyRead)
	for _, g := range c.DenyReadGlobs {
		fmt.Fprintf(w, "  %s/**/%s except %s  # %s\n", g.Within, g.Include, strings.Join(g.Exclude, ","), g.Source)
	}
	fmt.Fprintln(w, "capabilities kept (every other one is dropped, root included):")
	if len(c.Capabilities) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, cp := range c.Capabilities {
		fmt.Fprintf(w, "  %s: %s  # %s\n", cp.Name, cp.Reason, cp.Source)
	}
	for _, r := range c.Require {
		fmt.Fprintf(w, "requires: %s (a machine without it refuses to run)  # %s\n", r.Name, r.Source)
	}
	fmt.Fprintf(w, "network: %s, loopback %s\n", c.Network.Policy, c.Network.Loopback)
	for _, r := range c.Network.Allow {
		dest := r.Host
		if dest == "" {
			dest = r.Prefix.String()
		}
		var ports []string
		for _, p := range r.Ports {
			if p.First == p.Last {
				ports = append(ports, fmt.Sprint(p.First))
			} else {
				ports = append(ports, fmt.Sprintf("%d-%d", p.First, p.Last))
			}
		}
		if len(ports) > 0 {
			dest += " ports " + strings.Join(ports, ",")
		}
		fmt.Fprintf(w, "  allow %s  # %s\n", dest, r.Source)
	}
	agents := make([]string, 0, len(c.Permissions.Agents))
	for a := range c.Permissions.Agents {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	fmt.Fprintf(w, "permissions: default %s, %d rules, agents %v\n", c.Permissions.Default, len(c.Permissions.Rules), agents)
	fmt.Fprintf(w, "digest: %s\n", digest)
}

func cmdPolicyCheck(s streams, args []string) int {
	fs, pf, asJSON := policyFlagSet("check", s)
	tool := fs.String("tool", "", "tool name (bash, edit, read, ...)")
	input := fs.String("input", "", "the tool's input (a command line for bash, a path for file tools)")
	agent := fs.String("agent", "", "agent name, for [agent.NAME.permission] overrides")
	if code, ok := parsePolicyFlags(fs, s, args); !ok {
		return code
	}
	if *tool == "" || !fs.Changed("input") {
		fmt.Fprintln(s.err, "oxsupervise policy check: --tool and --input are required")
		return exitUsage
	}
	// Only the resolve step: an agent hook asks on every tool call, and the
	// answer depends on no path the policy names.
	r, _, err := policy.Resolve(policyOptions(pf, s.err))
	if err != nil {
		// A broken policy answers deny: never allow what cannot be judged.
		fmt.Fprintf(s.err, "oxsupervise policy check: %v\n", err)
		return exitFail
	}
	d := r.Permissions.Check(*tool, *input, *agent)
	if *asJSON {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			fmt.Fprintf(s.err, "oxsupervise policy check: %v\n", err)
			return exitFail
		}
	} else {
		fmt.Fprintf(s.out, "decision: %s\n", d.Action)
		if d.Rule != nil {
			fmt.Fprintf(s.out, "rule: %s %q %s  # %s\n", d.Rule.Tool, d.Rule.Pattern, d.Rule.Action, d.Rule.Source)
		} else {
			fmt.Fprintf(s.out, "rule: none (%s)\n", d.Reason)
		}
		for _, cd := range d.Commands {
			why := cd.Reason
			if cd.Rule != nil {
				why = fmt.Sprintf("%s %q %s  # %s", cd.Rule.Tool, cd.Rule.Pattern, cd.Rule.Action, cd.Rule.Source)
			}
			fmt.Fprintf(s.out, "  command %q: %s (%s)\n", cd.Command, cd.Action, why)
		}
		if len(d.Patterns) > 0 {
			fmt.Fprintf(s.out, "patterns: %s\n", strings.Join(d.Patterns, ", "))
		}
	}
	switch d.Action {
	case policy.ActionAllow:
		return exitOK
	case policy.ActionAsk:
		return exitAsk
	}
	return exitFail
}

package clidoc

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

// CLI is a command line as its help output describes it.
type CLI struct {
	// Name is the program name ("oxsupervise").
	Name string
	// Verbs are in the order of the program's verb table.
	Verbs []Verb
}

// Verb is one verb (or one subcommand of a verb, such as "audit tail").
type Verb struct {
	// Name is the verb's word; Path is every word after the program name
	// ("audit", "tail").
	Name string
	Path []string
	// Summary is the verb table's line for a verb; empty for a subcommand.
	Summary string
	// Usage is the text after "usage: " without the program name, or empty
	// when the help has no usage line.
	Usage string
	// Description holds the help's prose lines, in order.
	Description []string
	Flags       []Flag
	Subs        []Verb
}

// Flag is one line of pflag's flag listing.
type Flag struct {
	Long  string // without dashes
	Short string // one letter, or empty
	// Value is pflag's type word ("string", "int", "duration",
	// "stringArray"); empty for a boolean flag, which takes no argument.
	Value string
	Usage string
}

var (
	// pflag's FlagUsages line: "  -s, --sandbox string   usage" or
	// "      --json[=true|false]   usage".
	flagLine  = regexp.MustCompile(`^\s+(?:-([A-Za-z0-9]), )?--([A-Za-z0-9][A-Za-z0-9_-]*)(\[=true\|false\])?(?: ([A-Za-z][A-Za-z0-9]*))?(?:\s{2,}(.*))?$`)
	verbLine  = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)\s+(.*)$`)
	wordToken = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// ParseVerbTable reads the verb table of the program's top-level help: the
// lines below "verbs:" up to the next blank line.
func ParseVerbTable(help string) ([]Verb, error) {
	var out []Verb
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.TrimSpace(line) == "verbs:":
			in = true
		case in && strings.TrimSpace(line) == "":
			if len(out) > 0 {
				return out, nil
			}
		case in:
			m := verbLine.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("verb table line %q is not \"  NAME  SUMMARY\"", line)
			}
			out = append(out, Verb{Name: m[1], Path: []string{m[1]}, Summary: strings.TrimSpace(m[2])})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no \"verbs:\" table in the help output")
	}
	return out, nil
}

// ParseHelp fills v's usage, description and flags from its --help output.
func ParseHelp(prog string, v *Verb, help string) error {
	var last *Flag
	for _, line := range strings.Split(strings.TrimRight(help, "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			last = nil
		case v.Usage == "" && strings.HasPrefix(trimmed, "usage: "):
			v.Usage = strings.TrimPrefix(strings.TrimPrefix(trimmed, "usage: "), prog+" ")
		case strings.HasPrefix(trimmed, "Usage of "),
			strings.HasPrefix(trimmed, "Run '") && strings.Contains(trimmed, "--help'"):
			// pflag's default heading, and pointers to the help the
			// generated page already includes.
		case flagLine.MatchString(line):
			m := flagLine.FindStringSubmatch(line)
			f := Flag{Short: m[1], Long: m[2], Value: m[4], Usage: m[5]}
			if m[3] != "" {
				f.Value = ""
			}
			if slices.ContainsFunc(v.Flags, func(g Flag) bool { return g.Long == f.Long }) {
				// Printed twice (once per stream, as "policy show --help"
				// does): document it once.
				last = nil
				continue
			}
			v.Flags = append(v.Flags, f)
			last = &v.Flags[len(v.Flags)-1]
		case last != nil && strings.HasPrefix(line, "    "):
			// A usage string with a newline continues indented.
			last.Usage += " " + trimmed
		default:
			last = nil
			v.Description = append(v.Description, trimmed)
		}
	}
	return nil
}

// Subcommands lists the subcommand words a usage line names: "audit tail
// [flags]" names tail, "policy show [--json] | policy check ..." names
// show and check. Arguments (SESSION, ID, "claude-code|codex": choices
// are written without spaces around the bar, alternatives of the whole
// usage with them), flags and brackets are not subcommands.
func Subcommands(verb, usage string) []string {
	var out []string
	for _, alt := range strings.Split(usage, " | ") {
		f := strings.Fields(alt)
		if len(f) > 0 && f[0] != verb && len(f) > 1 && f[1] == verb {
			f = f[1:] // "oxsupervise policy check"
		}
		if len(f) < 2 || f[0] != verb || !wordToken.MatchString(f[1]) {
			continue
		}
		out = append(out, f[1])
	}
	return out
}

// Read runs bin's help for the program, every verb and every subcommand,
// and parses it. The help runs with a fixed, minimal environment so that
// defaults derived from the environment of whoever builds the package do
// not end up in the pages.
func Read(ctx context.Context, bin, prog string) (*CLI, error) {
	top, err := help(ctx, bin, "--help")
	if err != nil {
		return nil, err
	}
	verbs, err := ParseVerbTable(top)
	if err != nil {
		return nil, fmt.Errorf("%s --help: %w", bin, err)
	}
	c := &CLI{Name: prog}
	for _, v := range verbs {
		if err := readVerb(ctx, bin, prog, &v); err != nil {
			return nil, err
		}
		for _, sub := range Subcommands(v.Name, v.Usage) {
			s := Verb{Name: sub, Path: append(append([]string{}, v.Path...), sub)}
			if err := readVerb(ctx, bin, prog, &s); err != nil {
				return nil, err
			}
			v.Subs = append(v.Subs, s)
		}
		c.Verbs = append(c.Verbs, v)
	}
	return c, nil
}

func readVerb(ctx context.Context, bin, prog string, v *Verb) error {
	out, err := help(ctx, bin, append(append([]string{}, v.Path...), "--help")...)
	if err != nil {
		return err
	}
	return ParseHelp(prog, v, out)
}

func help(ctx context.Context, bin string, args ...string) (string, error) {
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	// One pipe for both streams keeps pflag's lines in the order written.
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, buf.String())
	}
	return buf.String(), nil
}

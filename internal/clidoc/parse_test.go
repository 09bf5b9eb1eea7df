package clidoc

import (
	"reflect"
	"testing"
)

func TestParseHelp(t *testing.T) {
	help := `usage: oxsupervise audit tail [-f] [--session ID]

Without -f, prints every matching record.
      --audit-log string      audit log to read (default "/var/log/x")
  -f, --follow[=true|false]   keep printing records
      --allow-net stringArray   allow a destination
      --net string            network policy: none | allowlist | full
      --audit-log string      audit log to read (default "/var/log/x")
`
	var v Verb
	if err := ParseHelp("oxsupervise", &v, help); err != nil {
		t.Fatal(err)
	}
	want := Verb{
		Usage:       "audit tail [-f] [--session ID]",
		Description: []string{"Without -f, prints every matching record."},
		Flags: []Flag{
			{Long: "audit-log", Value: "string", Usage: `audit log to read (default "/var/log/x")`},
			{Long: "follow", Short: "f", Usage: "keep printing records"},
			{Long: "allow-net", Value: "stringArray", Usage: "allow a destination"},
			{Long: "net", Value: "string", Usage: "network policy: none | allowlist | full"},
		},
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("ParseHelp:\n got %+v\nwant %+v", v, want)
	}
	if got := v.Flags[3].Choices(); !reflect.DeepEqual(got, []string{"none", "allowlist", "full"}) {
		t.Errorf("Choices = %q", got)
	}
	if !v.Flags[2].Repeatable() || v.Flags[0].Repeatable() {
		t.Errorf("Repeatable: allow-net %v, audit-log %v", v.Flags[2].Repeatable(), v.Flags[0].Repeatable())
	}
}

func TestSubcommands(t *testing.T) {
	for _, tc := range []struct {
		verb, usage string
		want        []string
	}{
		{"audit", "audit tail [flags]", []string{"tail"}},
		{"policy", "policy show [--json] | policy check --tool T --input S", []string{"show", "check"}},
		{"stop", "stop SESSION [--socket PATH]", nil},
		{"run", "run [policy flags] -- CMD [ARG...]", nil},
		{"exec", "exec --unsandboxed -- CMD", nil},
		{"version", "", nil},
		{"hook", "hook claude-code|codex [--no-nest]", nil},
		{"agent", "agent setup claude-code|codex [--managed]", []string{"setup"}},
	} {
		if got := Subcommands(tc.verb, tc.usage); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Subcommands(%q, %q) = %q, want %q", tc.verb, tc.usage, got, tc.want)
		}
	}
}

func TestParseVerbTable(t *testing.T) {
	got, err := ParseVerbTable("usage: x\n\nverbs:\n  run        run a command\n  stop       stop a session\n\nRun ...\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Verb{{Name: "run", Path: []string{"run"}, Summary: "run a command"}, {Name: "stop", Path: []string{"stop"}, Summary: "stop a session"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	if _, err := ParseVerbTable("no table here"); err == nil {
		t.Error("a help without a verb table parsed")
	}
}

func TestRoffText(t *testing.T) {
	for in, want := range map[string]string{
		`--json`:       `\-\-json`,
		`.hidden`:      `\&.hidden`,
		`a\b`:          `a\eb`,
		`'quote start`: `\&'quote start`,
	} {
		if got := roffText(in); got != want {
			t.Errorf("roffText(%q) = %q, want %q", in, got, want)
		}
	}
}

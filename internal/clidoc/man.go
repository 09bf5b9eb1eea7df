package clidoc

import (
	"bytes"
	"fmt"
	"strings"
)

// PageName is the file name of a verb's man page ("oxsupervise-run.1").
func (c *CLI) PageName(v Verb) string {
	return c.Name + "-" + strings.Join(v.Path, "-") + ".1"
}

// ManPages renders section-1 pages: one for the program (its verb table)
// and one per verb, each subcommand a section of its verb's page. version
// and date ("2026-12-01") go into the page footer; pass a date derived
// from the source (SOURCE_DATE_EPOCH) so the output is reproducible.
func (c *CLI) ManPages(version, date string) map[string][]byte {
	pages := map[string][]byte{c.Name + ".1": c.mainPage(version, date)}
	for _, v := range c.Verbs {
		pages[c.PageName(v)] = c.verbPage(v, version, date)
	}
	return pages
}

func (c *CLI) header(b *bytes.Buffer, title, version, date string) {
	fmt.Fprintf(b, ".TH %s 1 %s %s %s\n", roffQuote(strings.ToUpper(title)), roffQuote(date),
		roffQuote(c.Name+" "+version), roffQuote(c.Name+" manual"))
}

func (c *CLI) mainPage(version, date string) []byte {
	var b bytes.Buffer
	c.header(&b, c.Name, version, date)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- confine AI coding-agent sessions in a boundary the kernel enforces\n", c.Name)
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n.I VERB\n[\\fIFLAGS\\fR] [\\fB\\-\\-\\fR \\fICMD\\fR [\\fIARG\\fR...]]\n", c.Name)
	b.WriteString(".SH VERBS\n")
	for _, v := range c.Verbs {
		fmt.Fprintf(&b, ".TP\n.B %s\n%s See \\fB%s\\fR(1).\n", roffText(v.Name), roffText(v.Summary), roffText(strings.TrimSuffix(c.PageName(v), ".1")))
	}
	b.WriteString(".SH FILES\n.TP\n.I /etc/oxsupervise/policy.toml, /etc/oxsupervise/policy.d/*.toml\nmanaged policy (root-owned; may lock keys)\n")
	b.WriteString(".TP\n.I /var/log/oxsupervise/audit.jsonl\nthe audit log (JSON lines, Elastic Common Schema names)\n")
	b.WriteString(".TP\n.I /run/oxsupervise/api.sock\nthe daemon's API socket\n")
	b.WriteString(".SH SEE ALSO\n")
	refs := make([]string, 0, len(c.Verbs))
	for _, v := range c.Verbs {
		refs = append(refs, "\\fB"+roffText(strings.TrimSuffix(c.PageName(v), ".1"))+"\\fR(1)")
	}
	b.WriteString(strings.Join(refs, ",\n") + "\n")
	b.WriteString(".PP\n/usr/share/doc/oxsupervise/README.md, daemon.md and audit-schema.md\n")
	return b.Bytes()
}

func (c *CLI) verbPage(v Verb, version, date string) []byte {
	var b bytes.Buffer
	name := strings.TrimSuffix(c.PageName(v), ".1")
	c.header(&b, name, version, date)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffText(name), roffText(v.Summary))
	b.WriteString(".SH SYNOPSIS\n")
	c.synopsis(&b, v)
	for _, s := range v.Subs {
		b.WriteString(".br\n")
		c.synopsis(&b, s)
	}
	if len(v.Description) > 0 {
		b.WriteString(".SH DESCRIPTION\n")
		paragraphs(&b, v.Description)
	}
	options(&b, "OPTIONS", v.Flags)
	for _, s := range v.Subs {
		fmt.Fprintf(&b, ".SH %s\n", roffQuote(strings.ToUpper(strings.Join(s.Path, " "))))
		paragraphs(&b, s.Description)
		options(&b, "", s.Flags)
	}
	b.WriteString(".SH EXIT STATUS\n0 on success, 1 when the verb failed, 2 on a usage error; " +
		"\\fBrun\\fR and \\fBattach\\fR exit 125 when the boundary could not be built and nothing ran or was moved " +
		"(for \\fBattach\\fR this includes a policy with filesystem rules on a machine without BPF\\-LSM, unless " +
		"\\fB\\-\\-network\\-only\\fR is given; see /usr/share/doc/oxsupervise/README.md, \"Exit codes\").\n")
	fmt.Fprintf(&b, ".SH SEE ALSO\n\\fB%s\\fR(1)\n", roffText(c.Name))
	return b.Bytes()
}

func (c *CLI) synopsis(b *bytes.Buffer, v Verb) {
	usage := v.Usage
	if usage == "" {
		usage = strings.Join(v.Path, " ")
		if len(v.Flags) > 0 {
			usage += " [flags]"
		}
	}
	fmt.Fprintf(b, ".B %s\n%s\n", roffText(c.Name), roffText(usage))
}

func paragraphs(b *bytes.Buffer, lines []string) {
	for i, l := range lines {
		if i > 0 {
			b.WriteString(".br\n")
		}
		b.WriteString(roffText(l) + "\n")
	}
}

func options(b *bytes.Buffer, heading string, flags []Flag) {
	if len(flags) == 0 {
		return
	}
	if heading != "" {
		fmt.Fprintf(b, ".SH %s\n", heading)
	} else {
		b.WriteString(".PP\nOptions:\n")
	}
	for _, f := range flags {
		b.WriteString(".TP\n")
		if f.Short != "" {
			fmt.Fprintf(b, "\\fB\\-%s\\fR, ", roffText(f.Short))
		}
		fmt.Fprintf(b, "\\fB\\-\\-%s\\fR", roffText(f.Long))
		if f.Value != "" {
			fmt.Fprintf(b, " \\fI%s\\fR", roffText(f.Value))
		}
		b.WriteString("\n" + roffText(f.Usage) + "\n")
	}
}

// roffText escapes text for a roff line: backslashes, dashes (so man
// prints real hyphen-minus signs that can be copied into a shell), and a
// leading dot or quote that roff would take for a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffQuote is a macro argument: quoted, with quotes doubled.
func roffQuote(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `""`) + `"`
}

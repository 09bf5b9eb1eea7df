package policy

import (
	"strings"
)

// A minimal reader of git's config syntax (git-config(1), CONFIGURATION
// FILE), enough to find the settings that point git at files it runs or
// reads config from (core.hooksPath, include.path, includeIf.*.path).
// It is lenient where git is strict: a line it cannot read is skipped and
// the rest still read, since a setting missed here is protection missed,
// while a setting found in a file git refuses costs nothing.

// gitConfigEntry is one variable of a git config file. Section and Key are
// lower case (both are case-insensitive in git); Subsection keeps its case
// except in the legacy [section.subsection] form, which git lowercases.
type gitConfigEntry struct {
	Section, Subsection, Key string
	Value                    string
	// NoValue is a bare "key" line, which git reads as boolean true.
	NoValue bool
	// Line is the 1-based line of the key.
	Line int
}

// name is the entry's full name as git-config(1) writes it, section and key
// lower case: "core.hookspath", "includeif.gitdir:~/w/.path".
func (e gitConfigEntry) name() string {
	if e.Subsection != "" {
		return e.Section + "." + e.Subsection + "." + e.Key
	}
	return e.Section + "." + e.Key
}

// parseGitConfig reads every variable of a git config file, in order.
func parseGitConfig(text string) []gitConfigEntry {
	var out []gitConfigEntry
	var section, subsection string
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(lines[i], " \t")
		if strings.HasPrefix(line, "[") {
			var rest string
			var ok bool
			section, subsection, rest, ok = parseGitSection(line)
			if !ok {
				section, subsection = "", "" // what follows belongs to no section we know
				continue
			}
			line = strings.TrimLeft(rest, " \t") // git allows a variable after the header
		}
		if line == "" || line[0] == '#' || line[0] == ';' || section == "" {
			continue
		}
		key, rest := gitKey(line)
		if key == "" {
			continue
		}
		rest = strings.TrimLeft(rest, " \t")
		e := gitConfigEntry{Section: section, Subsection: subsection, Key: key, Line: i + 1}
		switch {
		case rest == "" || rest[0] == '#' || rest[0] == ';':
			e.NoValue = true
		case rest[0] == '=':
			// A value may continue on the next lines (a backslash before
			// the newline); hand the value the lines that follow.
			var used int
			e.Value, used = parseGitValue(rest[1:], lines[i+1:])
			i += used
		default:
			continue // "key junk": git refuses the line
		}
		out = append(out, e)
	}
	return out
}

// parseGitSection reads a section header: [name], [name "subsection"] or
// the legacy [name.subsection]. It returns what follows the "]".
func parseGitSection(line string) (section, subsection, rest string, ok bool) {
	line = line[1:]
	i := 0
	for i < len(line) && (isAlnum(line[i]) || line[i] == '-' || line[i] == '.') {
		i++
	}
	name := line[:i]
	line = line[i:]
	if name == "" {
		return "", "", "", false
	}
	if strings.HasPrefix(line, "]") {
		if s, sub, dotted := strings.Cut(name, "."); dotted {
			return strings.ToLower(s), strings.ToLower(sub), line[1:], true
		}
		return strings.ToLower(name), "", line[1:], true
	}
	line = strings.TrimLeft(line, " \t")
	if !strings.HasPrefix(line, `"`) {
		return "", "", "", false
	}
	var sub strings.Builder
	for j := 1; j < len(line); j++ {
		switch c := line[j]; c {
		case '\\':
			if j+1 < len(line) {
				j++
				sub.WriteByte(line[j])
			}
		case '"':
			if !strings.HasPrefix(line[j+1:], "]") {
				return "", "", "", false
			}
			return strings.ToLower(name), sub.String(), line[j+2:], true
		default:
			sub.WriteByte(c)
		}
	}
	return "", "", "", false
}

// gitKey reads a variable name (a letter, then letters, digits and "-").
func gitKey(line string) (key, rest string) {
	if line == "" || !isAlpha(line[0]) {
		return "", line
	}
	i := 1
	for i < len(line) && (isAlnum(line[i]) || line[i] == '-') {
		i++
	}
	return strings.ToLower(line[:i]), line[i:]
}

// parseGitValue reads a value: surrounding blanks dropped (inside double
// quotes kept), a comment (# or ;) outside quotes ends it, escapes \" \\
// \n \t \b, and a backslash at the end of a line continues it on the next
// of more. It returns the value and how many of more it used.
func parseGitValue(s string, more []string) (string, int) {
	var b strings.Builder
	quoted := false
	used := 0
	pending := "" // blanks seen outside quotes, kept only if more follows
	started := false
	for j := 0; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '\\':
			if j+1 == len(s) {
				// Continuation: the value goes on with the next line.
				if used < len(more) {
					s = more[used]
					used++
					j = -1
					continue
				}
				return b.String(), used
			}
			j++
			b.WriteString(pending)
			pending = ""
			switch s[j] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			default:
				b.WriteByte(s[j]) // \" and \\ (git refuses others; keep the byte)
			}
			started = true
		case c == '"':
			b.WriteString(pending)
			pending = ""
			quoted = !quoted
			started = true
		case !quoted && (c == '#' || c == ';'):
			return b.String(), used
		case !quoted && (c == ' ' || c == '\t'):
			if started {
				pending += string(c)
			}
		default:
			b.WriteString(pending)
			pending = ""
			b.WriteByte(c)
			started = true
		}
	}
	return b.String(), used
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }

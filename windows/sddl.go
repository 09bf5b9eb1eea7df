package windows

import (
	"fmt"
	"strings"
)

// dropExplicitACEs removes from the DACL of an SDDL string every explicit
// (not inherited) ACE whose trustee is sid, allow and deny alike, and
// reports whether the DACL is protected from inheritance ("D:P..."). It is
// how undo removes exactly the session's ACEs without touching changes
// others made to the same DACL during the session. (REVOKE_ACCESS in
// SetEntriesInAcl removes only allow ACEs, so it cannot undo deny ACEs.)
func dropExplicitACEs(sddl, sid string) (out string, removed int, protected bool, err error) {
	start := strings.Index(sddl, "D:")
	if start < 0 {
		return sddl, 0, false, nil
	}
	var b strings.Builder
	b.WriteString(sddl[:start+2])
	i := start + 2
	// DACL flags run up to the first ACE.
	for i < len(sddl) && sddl[i] != '(' && !isSectionStart(sddl, i) {
		b.WriteByte(sddl[i])
		i++
	}
	protected = strings.Contains(sddl[start+2:i], "P")
	for i < len(sddl) && sddl[i] == '(' {
		end, err := aceEnd(sddl, i)
		if err != nil {
			return "", 0, false, err
		}
		ace := sddl[i : end+1]
		if aceIsExplicitFor(ace, sid) {
			removed++
		} else {
			b.WriteString(ace)
		}
		i = end + 1
	}
	if i < len(sddl) && !isSectionStart(sddl, i) {
		return "", 0, false, fmt.Errorf("sddl %q: unexpected %q at offset %d", sddl, sddl[i], i)
	}
	b.WriteString(sddl[i:])
	return b.String(), removed, protected, nil
}

// isSectionStart reports whether an O:, G:, D: or S: section starts at i.
func isSectionStart(s string, i int) bool {
	return i+1 < len(s) && s[i+1] == ':' && strings.IndexByte("OGDS", s[i]) >= 0
}

// aceEnd returns the index of the ')' closing the ACE that opens at i;
// conditional ACEs nest parentheses and may quote strings.
func aceEnd(s string, i int) (int, error) {
	depth := 0
	inQuote := false
	for j := i; j < len(s); j++ {
		switch c := s[j]; {
		case inQuote:
			if c == '"' {
				inQuote = false
			}
		case c == '"':
			inQuote = true
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("sddl: unterminated ACE at offset %d", i)
}

// aceIsExplicitFor reports whether "(type;flags;rights;guid;iguid;sid...)"
// names sid and lacks the ID (inherited) flag.
func aceIsExplicitFor(ace, sid string) bool {
	fields := strings.SplitN(strings.TrimSuffix(strings.TrimPrefix(ace, "("), ")"), ";", 7)
	if len(fields) < 6 {
		return false
	}
	flags := fields[1]
	for k := 0; k+1 < len(flags); k += 2 {
		if flags[k:k+2] == "ID" {
			return false
		}
	}
	return strings.EqualFold(fields[5], sid)
}

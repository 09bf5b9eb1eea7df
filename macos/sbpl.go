package macos

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// sessionIDPattern is the alphabet a session id must use to be placed in
// profile text (rule messages) without any escaping.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// regexMeta are the characters AppleMatch (POSIX extended regular
// expressions) gives a meaning; each is matched literally by prefixing a
// backslash, the same form Apple's own profiles use (#"\.DS_Store").
const regexMeta = `.[]()*+?{}|^$`

// componentRegex turns one literal path component into a regex fragment.
// Characters that would need escaping at the SBPL string level (the double
// quote and the backslash) or that have no business in a file name
// (control characters, invalid UTF-8, '/') are refused rather than encoded:
// an encoding we cannot test against the real parser is an injection risk.
func componentRegex(component string) (string, error) {
	if component == "" || component == "." || component == ".." {
		return "", fmt.Errorf("component %q is not a file name", component)
	}
	if !utf8.ValidString(component) {
		return "", fmt.Errorf("component %q is not valid UTF-8", component)
	}
	var b strings.Builder
	for _, r := range component {
		frag, err := escapeRune(r)
		if err != nil {
			return "", fmt.Errorf("component %q %w", component, err)
		}
		b.WriteString(frag)
	}
	return b.String(), nil
}

// escapeRune returns the regex fragment matching r literally.
func escapeRune(r rune) (string, error) {
	switch {
	case r == '"' || r == '\\':
		return "", fmt.Errorf("contains %q, which cannot be placed safely in a Seatbelt regex", r)
	case r == '/':
		return "", fmt.Errorf("contains '/'")
	case r < 0x20 || r == 0x7f:
		return "", fmt.Errorf("contains control character %U", r)
	case strings.ContainsRune(regexMeta, r):
		return "\\" + string(r), nil
	}
	return string(r), nil
}

// globRegex turns a single-component glob (*, ? and literal characters)
// into a regex fragment that never crosses '/'. Bracket classes are refused
// because their edge cases ([!...], []...], ranges) differ between glob
// dialects and a silent mistranslation would widen or narrow a rule.
func globRegex(glob string) (string, error) {
	if glob == "" {
		return "", fmt.Errorf("empty glob")
	}
	var b strings.Builder
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '[', ']':
			return "", fmt.Errorf("glob %q: bracket classes are not supported by the Seatbelt backend", glob)
		default:
			frag, err := escapeRune(r)
			if err != nil {
				return "", fmt.Errorf("glob %q %w", glob, err)
			}
			b.WriteString(frag)
		}
	}
	return b.String(), nil
}

// regexLiteral wraps a regex built by this package as an SBPL regex
// literal. Callers only pass text produced by componentRegex/globRegex or
// constants, none of which contain a double quote.
func regexLiteral(re string) string {
	return `#"` + re + `"`
}

// stringLiteral quotes a constant string (never policy data) as an SBPL
// string.
func stringLiteral(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// paramRef is the SBPL expression reading a -D parameter.
func paramRef(key string) string {
	return `(param ` + stringLiteral(key) + `)`
}

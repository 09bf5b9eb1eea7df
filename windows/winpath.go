package windows

import (
	"fmt"
	"strings"
)

// cleanWinPath checks that p is an absolute local (C:\...) or UNC
// (\\server\share\...) path and normalises separators and trailing
// backslashes. Relative paths, device paths and alternate data streams
// (a ':' after the drive) are refused: an ACE on them would not mean what
// the policy says.
func cleanWinPath(what, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%s %q contains a NUL byte", what, p)
	}
	p = strings.ReplaceAll(p, "/", `\`)
	switch {
	case strings.HasPrefix(p, `\\?\`) || strings.HasPrefix(p, `\\.\`):
		return "", fmt.Errorf("%s %q is a device or extended-length path; give a plain absolute path", what, p)
	case len(p) >= 3 && isLetter(p[0]) && p[1] == ':' && p[2] == '\\':
		if strings.Contains(p[2:], ":") {
			return "", fmt.Errorf("%s %q names an alternate data stream", what, p)
		}
	case strings.HasPrefix(p, `\\`):
		if strings.Contains(p, ":") {
			return "", fmt.Errorf("%s %q names an alternate data stream", what, p)
		}
		parts := strings.Split(strings.TrimPrefix(p, `\\`), `\`)
		if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
			return "", fmt.Errorf("%s %q is not a \\\\server\\share path", what, p)
		}
	default:
		return "", fmt.Errorf("%s %q is not an absolute Windows path", what, p)
	}
	for _, comp := range strings.Split(p, `\`) {
		if comp == "." || comp == ".." {
			return "", fmt.Errorf("%s %q contains %q", what, p, comp)
		}
	}
	for len(p) > 3 && strings.HasSuffix(p, `\`) {
		p = strings.TrimSuffix(p, `\`)
	}
	return p, nil
}

func isLetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }

// isVolumeRoot reports whether p is C:\ or \\server\share.
func isVolumeRoot(p string) bool {
	if len(p) == 3 && p[1] == ':' {
		return true
	}
	if strings.HasPrefix(p, `\\`) {
		return len(strings.Split(strings.TrimPrefix(p, `\\`), `\`)) <= 2
	}
	return false
}

// winAncestors lists the directories above p, nearest first, stopping
// before the volume root.
func winAncestors(p string) []string {
	var out []string
	for {
		i := strings.LastIndexByte(p, '\\')
		if i < 0 {
			return out
		}
		parent := p[:i]
		if len(parent) == 2 && parent[1] == ':' {
			return out // C: -> the volume root
		}
		if isVolumeRoot(parent) {
			return out
		}
		out = append(out, parent)
		p = parent
	}
}

// containingRoot returns the root that p is equal to or below (Windows
// paths compare case-insensitively), or "".
func containingRoot(p string, roots []string) string {
	lp := strings.ToLower(p)
	for _, r := range roots {
		lr := strings.ToLower(r)
		if lp == lr || strings.HasPrefix(lp, strings.TrimSuffix(lr, `\`)+`\`) {
			return r
		}
	}
	return ""
}

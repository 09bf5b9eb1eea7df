package fsguard

import (
	"fmt"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// Limits of bpf/fs.h's deny-read globs.
const (
	maxGlobs   = 8  // FS_GLOBS
	maxGlobLen = 32 // FS_GLOB_LEN
)

// globSlot is one compiled glob: a name matches when it is prefix (no
// star) or starts with prefix and ends with suffix (star).
type globSlot struct {
	prefix, suffix string
	star           bool
	excludeOf      int // -1: an include glob; k: an exception to slot k
	source         int // index into the policy's DenyReadGlobs
}

// compileGlobs turns deny-read globs into the slots the programs match
// leaf names against. Only one '*' and no other metacharacters are
// supported; anything else is an error, not a glob silently matched
// differently.
func compileGlobs(globs []policy.NameGlob) ([]globSlot, error) {
	var slots []globSlot
	for i, g := range globs {
		inc, err := parseGlob(g.Include)
		if err != nil {
			return nil, fmt.Errorf("deny-read glob %q (%s): %w", g.Include, sourceOr(g.Source), err)
		}
		inc.excludeOf, inc.source = -1, i
		k := len(slots)
		slots = append(slots, inc)
		for _, ex := range g.Exclude {
			e, err := parseGlob(ex)
			if err != nil {
				return nil, fmt.Errorf("deny-read glob %q exception %q (%s): %w", g.Include, ex, sourceOr(g.Source), err)
			}
			e.excludeOf, e.source = k, i
			slots = append(slots, e)
		}
	}
	if len(slots) > maxGlobs {
		return nil, fmt.Errorf("%d deny-read globs and exceptions, the BPF-LSM layer holds at most %d", len(slots), maxGlobs)
	}
	return slots, nil
}

func parseGlob(g string) (globSlot, error) {
	if g == "" || strings.Contains(g, "/") {
		return globSlot{}, fmt.Errorf("not a name glob")
	}
	if strings.ContainsAny(g, `?[]\`) || strings.Count(g, "*") > 1 {
		return globSlot{}, fmt.Errorf("the BPF-LSM layer supports one '*' and no other metacharacters")
	}
	prefix, suffix, star := strings.Cut(g, "*")
	if len(prefix) > maxGlobLen || len(suffix) > maxGlobLen {
		return globSlot{}, fmt.Errorf("parts longer than %d bytes", maxGlobLen)
	}
	return globSlot{prefix: prefix, suffix: suffix, star: star}, nil
}

// matches is the programs' leaf_globs for one slot, for tests.
func (s globSlot) matches(name string) bool {
	if !s.star {
		return name == s.prefix
	}
	return len(name) >= len(s.prefix)+len(s.suffix) && strings.HasPrefix(name, s.prefix) && strings.HasSuffix(name, s.suffix)
}

// sourceOr names where a rule came from in events and errors.
func sourceOr(s string) string {
	if s == "" {
		return "unknown source"
	}
	return s
}

package fsguard

import (
	"fmt"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// Limits the BPF side imposes (bpf/fs.h).
const (
	nfaWords   = 4
	nfaBits    = nfaWords * 64
	maxNameLen = 63 // FS_NAME_LEN - 1
)

type bitset [nfaWords]uint64

func (b *bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b *bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) and(o bitset) (r bitset) {
	for k := range b {
		r[k] = b[k] & o[k]
	}
	return r
}
func (b bitset) or(o bitset) (r bitset) {
	for k := range b {
		r[k] = b[k] | o[k]
	}
	return r
}
func (b bitset) andNot(o bitset) (r bitset) {
	for k := range b {
		r[k] = b[k] &^ o[k]
	}
	return r
}
func (b bitset) shl1() (r bitset) {
	var carry uint64
	for k := range b {
		r[k] = b[k]<<1 | carry
		carry = b[k] >> 63
	}
	return r
}
func (b bitset) empty() bool { return b == bitset{} }

// nfa is the compiled form of a session's protected patterns. Each
// pattern owns len(Components) consecutive bits, its last component the
// lowest: the BPF walk reads names from the entry upwards.
type nfa struct {
	start, final, wildcard, dirOnly, fileOnly bitset
	// checkedAtEnd are the final bits of policy.ProtectedPattern.CheckedAtEnd
	// patterns (fs_session.checked_at_end).
	checkedAtEnd bitset
	names        map[string]bitset
	// patternOfBit maps every bit to the index of its pattern.
	patternOfBit []int
}

func compilePatterns(patterns []policy.ProtectedPattern) (*nfa, error) {
	n := &nfa{names: map[string]bitset{}}
	base := 0
	for i, p := range patterns {
		if len(p.Components) == 0 {
			return nil, fmt.Errorf("protected pattern %d (%s): no components", i, p.Source)
		}
		if base+len(p.Components) > nfaBits {
			return nil, fmt.Errorf("protected patterns have more than %d components in total (pattern %d, %s, is past the limit)", nfaBits, i, p.Source)
		}
		for j, c := range p.Components {
			if c == "" || c == "." || c == ".." || strings.Contains(c, "/") || strings.IndexByte(c, 0) >= 0 {
				return nil, fmt.Errorf("protected pattern %q (%s): component %q is not a file name", strings.Join(p.Components, "/"), p.Source, c)
			}
			if len(c) > maxNameLen {
				return nil, fmt.Errorf("protected pattern %q (%s): component %q is longer than %d bytes", strings.Join(p.Components, "/"), p.Source, c, maxNameLen)
			}
			bit := base + len(p.Components) - 1 - j
			if c == "*" {
				n.wildcard.set(bit)
			} else {
				b := n.names[c]
				b.set(bit)
				n.names[c] = b
			}
			n.patternOfBit = append(n.patternOfBit, 0)
		}
		for k := base; k < base+len(p.Components); k++ {
			n.patternOfBit[k] = i
		}
		n.start.set(base)
		n.final.set(base + len(p.Components) - 1)
		if p.CheckedAtEnd {
			// The programs let such a creation through knowing a file
			// pattern starts at the entry itself, never at an ancestor.
			if p.Type != policy.EntryFile {
				return nil, fmt.Errorf("protected pattern %q (%s): checked at the session's end but not a file pattern", strings.Join(p.Components, "/"), p.Source)
			}
			n.checkedAtEnd.set(base + len(p.Components) - 1)
		}
		switch p.Type {
		case policy.EntryDir:
			n.dirOnly.set(base)
		case policy.EntryFile:
			n.fileOnly.set(base)
		case policy.EntryAny, "":
		default:
			return nil, fmt.Errorf("protected pattern %q (%s): unknown entry type %q", strings.Join(p.Components, "/"), p.Source, p.Type)
		}
		base += len(p.Components)
	}
	return n, nil
}

// entryKind is what a walk knows about the entry at its start.
type entryKind int

const (
	entryUnknown entryKind = iota
	entryDir
	entryFile
)

// match runs the NFA exactly as bpf/fs.c does over the components of a
// path below a writable root (outermost first), and returns the final
// bits hit. prefix is the CHECK_PREFIX mode of renames and links.
func (n *nfa) match(components []string, leaf entryKind, prefix bool) bitset {
	var state, hit bitset
	startDir := n.start.andNot(n.fileOnly)
	startFile := n.start.andNot(n.dirOnly)
	for level := 0; level < len(components); level++ {
		name := components[len(components)-1-level]
		allowed := n.wildcard.or(n.names[name])
		if level == 0 {
			start := n.start
			switch {
			case prefix:
				start = bitset{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
			case leaf == entryDir:
				start = startDir
			case leaf == entryFile:
				start = startFile
			}
			state = allowed.and(start)
		} else {
			state = state.shl1().andNot(n.start).and(allowed).or(allowed.and(startDir))
		}
		hit = hit.or(state.and(n.final))
	}
	return hit
}

// patterns returns the indexes of the patterns whose final bits are set.
func (n *nfa) patterns(final bitset) []int {
	var out []int
	for i := 0; i < len(n.patternOfBit); i++ {
		if final.has(i) && n.final.has(i) {
			out = append(out, n.patternOfBit[i])
		}
	}
	return out
}

package policy

import "strings"

// Error is a policy error tied to where the offending value was written:
// "file:line:col: message" (or "flag --NAME: message"), followed by the
// position of the managed lock it collides with, if any, and a hint.
type Error struct {
	Pos pos
	Msg string
	// Related is a second position the message refers to (the managed
	// lock, the earlier conflicting key).
	Related *pos
	// RelatedWhat describes Related ("locked by", "also set at").
	RelatedWhat string
	Hint        string
}

func (e *Error) Error() string {
	var b strings.Builder
	if s := e.Pos.String(); s != "" {
		b.WriteString(s)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Related != nil {
		b.WriteString(" (")
		b.WriteString(e.RelatedWhat)
		b.WriteByte(' ')
		b.WriteString(e.Related.String())
		b.WriteByte(')')
	}
	if e.Hint != "" {
		b.WriteString("; hint: ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// closest returns the candidate nearest to s by edit distance, or "" when
// none is near enough to be a plausible typo.
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

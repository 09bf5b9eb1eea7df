package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// pos is where something was written: a file and a 1-based line and column.
type pos struct {
	File string
	Line int
	Col  int
}

func (p pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// doc is one parsed policy file: the plain value tree (as go-toml decodes
// it) plus the position of every key, table header and array element,
// indexed by keyPath.
type doc struct {
	file string
	tree map[string]any
	// keys holds the position of each key; vals the position of each value
	// when the parser records one (scalars, inline tables, array elements).
	keys map[string]pos
	vals map[string]pos
}

// keyPath renders a key path the way errors and `policy show` print it:
// bare parts joined by dots, other parts quoted, array indexes as [i].
func keyPath(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if strings.HasPrefix(p, "[") {
			b.WriteString(p)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(p) {
			b.WriteString(p)
		} else {
			b.WriteString(strconv.Quote(p))
		}
	}
	return b.String()
}

func index(i int) string { return "[" + strconv.Itoa(i) + "]" }

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseTOML decodes data and indexes the positions of its keys. Syntax
// errors and TOML-level semantic errors (duplicate keys, redefined tables)
// come back as *Error with the position go-toml reports.
func parseTOML(file string, data []byte) (*doc, error) {
	d := &doc{file: file, tree: map[string]any{}, keys: map[string]pos{}, vals: map[string]pos{}}
	if err := toml.Unmarshal(data, &d.tree); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			msg := de.Error()
			if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "toml:") {
				msg = msg[i+2:]
			}
			return nil, &Error{Pos: pos{file, line, col}, Msg: "invalid TOML: " + strings.TrimPrefix(msg, "toml: "), Hint: "see https://toml.io for the syntax"}
		}
		return nil, &Error{Pos: pos{File: file}, Msg: "invalid TOML: " + err.Error()}
	}
	var p unstable.Parser
	p.Reset(data)
	w := posWalker{p: &p, d: d, arrays: map[string]int{}}
	for p.NextExpression() {
		w.expression(p.Expression())
	}
	if err := p.Error(); err != nil {
		// Unmarshal accepted the document, so the parser should too.
		return nil, &Error{Pos: pos{File: file}, Msg: "invalid TOML: " + err.Error()}
	}
	return d, nil
}

type posWalker struct {
	p      *unstable.Parser
	d      *doc
	prefix []string
	// arrays counts the elements seen so far of each array of tables,
	// keyed by its indexed path.
	arrays map[string]int
}

func (w *posWalker) at(n *unstable.Node) pos {
	s := w.p.Shape(n.Raw)
	return pos{w.d.file, s.Start.Line, s.Start.Column}
}

func (w *posWalker) keyParts(n *unstable.Node) ([]string, []pos) {
	var parts []string
	var ps []pos
	it := n.Key()
	for it.Next() {
		k := it.Node()
		parts = append(parts, string(k.Data))
		ps = append(ps, w.at(k))
	}
	return parts, ps
}

// resolve turns a header's key parts into an indexed path: every part that
// names an array of tables refers to its latest element.
func (w *posWalker) resolve(parts []string, ps []pos, newElement bool) []string {
	var out []string
	for i, part := range parts {
		out = append(out, part)
		k := keyPath(out...)
		if _, ok := w.d.keys[k]; !ok {
			w.d.keys[k] = ps[i]
		}
		n, isArray := w.arrays[k]
		last := i == len(parts)-1
		if last && newElement {
			w.arrays[k] = n + 1
			out = append(out, index(n))
			w.d.keys[keyPath(out...)] = ps[i]
			continue
		}
		if isArray {
			out = append(out, index(n-1))
		}
	}
	return out
}

func (w *posWalker) expression(e *unstable.Node) {
	switch e.Kind {
	case unstable.Table:
		parts, ps := w.keyParts(e)
		w.prefix = w.resolve(parts, ps, false)
	case unstable.ArrayTable:
		parts, ps := w.keyParts(e)
		w.prefix = w.resolve(parts, ps, true)
	case unstable.KeyValue:
		w.keyValue(w.prefix, e)
	}
}

func (w *posWalker) keyValue(prefix []string, e *unstable.Node) {
	parts, ps := w.keyParts(e)
	path := append([]string(nil), prefix...)
	for i, part := range parts {
		path = append(path, part)
		k := keyPath(path...)
		if _, ok := w.d.keys[k]; !ok {
			w.d.keys[k] = ps[i]
		}
	}
	w.value(path, e.Value(), ps[len(ps)-1])
}

func (w *posWalker) value(path []string, v *unstable.Node, fallback pos) {
	k := keyPath(path...)
	here := fallback
	if v.Kind != unstable.Array {
		here = w.at(v)
	}
	w.d.vals[k] = here
	switch v.Kind {
	case unstable.Array:
		i := 0
		it := v.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			elem := append(append([]string(nil), path...), index(i))
			w.d.keys[keyPath(elem...)] = here
			w.value(elem, c, here)
			i++
		}
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.KeyValue {
				w.keyValue(path, c)
			}
		}
	}
}

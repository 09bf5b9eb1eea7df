package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// setting is one key's value in one layer, with where it was written.
type setting struct {
	val any // string, bool, int64 or []string
	pos pos
	// elems are the positions of list elements (same length as the list).
	elems []pos
	// src overrides pos.String() as the human source (flags, presets).
	src string
}

func (s setting) source() string {
	if s.src != "" {
		return s.src
	}
	return s.pos.String()
}

func (s setting) elemSource(i int) string {
	if i < len(s.elems) && (s.elems[i].Line != 0 || s.elems[i].File != "") {
		return s.elems[i].String()
	}
	return s.source()
}

// agentLayer is one [agent.NAME.permission] table in one layer.
type agentLayer struct {
	def   *setting
	rules []PermissionRule
	pos   []pos
}

// layer is one policy source after decoding and validation.
type layer struct {
	name     string
	managed  bool
	settings map[string]setting
	rules    []PermissionRule
	rulePos  []pos
	agents   map[string]*agentLayer
	// locks are the keys [managed] locked (managed layers only).
	locks map[string]pos
}

func newLayer(name string, managed bool) *layer {
	return &layer{name: name, managed: managed, settings: map[string]setting{}, agents: map[string]*agentLayer{}, locks: map[string]pos{}}
}

var topTables = []string{"agent", "audit", "env", "limits", "managed", "metrics", "network", "permissions", "sandbox"}

// decodeLayer validates a parsed file against the schema.
func decodeLayer(d *doc, managed bool) (*layer, error) {
	l := newLayer(d.file, managed)
	sch := schema()
	for _, top := range sortedKeys(d.tree) {
		v := d.tree[top]
		if !slices.Contains(topTables, top) {
			return nil, d.unknownKey([]string{top}, topTables)
		}
		tbl, ok := v.(map[string]any)
		if !ok {
			return nil, d.typeError([]string{top}, "a table", v)
		}
		switch top {
		case "agent":
			if err := d.decodeAgents(l, tbl); err != nil {
				return nil, err
			}
			continue
		case "managed":
			if err := d.decodeManaged(l, tbl); err != nil {
				return nil, err
			}
			continue
		}
		var known []string
		for k := range sch {
			if strings.HasPrefix(k, top+".") {
				known = append(known, strings.TrimPrefix(k, top+"."))
			}
		}
		if top == "sandbox" {
			known = append(known, "network")
		}
		if top == "permissions" {
			known = append(known, "rules")
		}
		for _, key := range sortedKeys(tbl) {
			path := []string{top, key}
			full := top + "." + key
			if full == "permissions.rules" {
				if err := d.decodeRules(path, tbl[key], &l.rules, &l.rulePos); err != nil {
					return nil, err
				}
				continue
			}
			if full == aliasNetwork {
				b, ok := tbl[key].(bool)
				if !ok {
					return nil, d.typeError(path, "a boolean (true = network.policy \"full\", false = \"none\")", tbl[key])
				}
				p := d.valPos(path)
				if other, ok := d.tree["network"].(map[string]any); ok {
					if _, both := other["policy"]; both {
						op := d.keyPos([]string{"network", "policy"})
						return nil, &Error{Pos: d.keyPos(path), Msg: "sandbox.network and network.policy are both set", Related: &op, RelatedWhat: "network.policy set at", Hint: "keep one of them"}
					}
				}
				pol := NetNone
				if b {
					pol = NetFull
				}
				l.settings["network.policy"] = setting{val: string(pol), pos: p}
				continue
			}
			if sub, ok := tbl[key].(map[string]any); ok && hasSubtable(sch, full) {
				// A table below a table ([audit.otlp]): its keys are
				// schema keys of three parts.
				if err := d.decodeSubtable(l, sch, path, sub); err != nil {
					return nil, err
				}
				continue
			}
			spec, ok := sch[full]
			if !ok {
				return nil, d.unknownKey(path, known)
			}
			s, err := d.decodeValue(path, spec, tbl[key])
			if err != nil {
				return nil, err
			}
			l.settings[full] = s
		}
	}
	return l, nil
}

func (d *doc) keyPos(path []string) pos {
	if p, ok := d.keys[keyPath(path...)]; ok {
		return p
	}
	return pos{File: d.file}
}

func (d *doc) valPos(path []string) pos {
	if p, ok := d.vals[keyPath(path...)]; ok {
		return p
	}
	return d.keyPos(path)
}

func (d *doc) unknownKey(path []string, known []string) error {
	k := keyPath(path...)
	hint := "known keys here: " + strings.Join(sortedStrings(known), ", ")
	if c := closest(path[len(path)-1], known); c != "" {
		hint = fmt.Sprintf("did you mean %q? ", c) + hint
	}
	return &Error{Pos: d.keyPos(path), Msg: fmt.Sprintf("unknown key %s", k), Hint: hint}
}

func (d *doc) typeError(path []string, want string, got any) error {
	return &Error{Pos: d.valPos(path), Msg: fmt.Sprintf("%s must be %s, not %s", keyPath(path...), want, tomlType(got))}
}

func (d *doc) valueError(path []string, err error, hint string) error {
	return &Error{Pos: d.valPos(path), Msg: fmt.Sprintf("bad value for %s: %v", keyPath(path[:firstIndex(path)]...), err), Hint: hint}
}

// firstIndex is the length of path up to its first array index, so errors
// about a list element name the key.
func firstIndex(path []string) int {
	for i, p := range path {
		if strings.HasPrefix(p, "[") {
			return i
		}
	}
	return len(path)
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

func (d *doc) decodeValue(path []string, spec keySpec, v any) (setting, error) {
	s := setting{pos: d.valPos(path)}
	enumHint := ""
	if spec.enum != nil {
		enumHint = "one of: " + strings.Join(spec.enum, ", ")
	}
	checkString := func(p []string, str string) error {
		if spec.enum != nil && !slices.Contains(spec.enum, str) {
			return d.valueError(p, fmt.Errorf("%q", str), enumHint)
		}
		if spec.check != nil {
			if err := spec.check(str); err != nil {
				return d.valueError(p, err, spec.hint)
			}
		}
		return nil
	}
	switch spec.kind {
	case kindString:
		str, ok := v.(string)
		if !ok {
			return s, d.typeError(path, spec.kind.String(), v)
		}
		if err := checkString(path, str); err != nil {
			return s, err
		}
		s.val = str
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return s, d.typeError(path, spec.kind.String(), v)
		}
		s.val = b
	case kindInt:
		n, ok := v.(int64)
		if !ok {
			return s, d.typeError(path, spec.kind.String(), v)
		}
		if n < 0 {
			return s, d.valueError(path, fmt.Errorf("%d is negative", n), "use 0 for unlimited")
		}
		s.val = n
	case kindSize:
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return s, d.valueError(path, fmt.Errorf("%d is negative", x), "use 0 for unlimited")
			}
			s.val = x
		case string:
			n, err := parseSize(x)
			if err != nil {
				return s, d.valueError(path, err, spec.kind.String())
			}
			s.val = n
		default:
			return s, d.typeError(path, spec.kind.String(), v)
		}
		if spec.checkNum != nil {
			if err := spec.checkNum(s.val.(int64)); err != nil {
				return s, d.valueError(path, err, spec.hint)
			}
		}
	case kindStrings:
		arr, ok := v.([]any)
		if !ok {
			return s, d.typeError(path, spec.kind.String(), v)
		}
		list := make([]string, 0, len(arr))
		for i, e := range arr {
			p := append(slices.Clone(path), index(i))
			str, ok := e.(string)
			if !ok {
				return s, d.typeError(p, "a string", e)
			}
			if err := checkString(p, str); err != nil {
				return s, err
			}
			list = append(list, str)
			s.elems = append(s.elems, d.valPos(p))
		}
		s.val = list
	}
	return s, nil
}

// parseSize accepts "123", "512K", "512M", "2G", "1T" (binary units, an
// optional trailing "B" or "iB").
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

var actionNames = []string{string(ActionDeny), string(ActionAsk), string(ActionAllow)}

func (d *doc) decodeRules(path []string, v any, rules *[]PermissionRule, ps *[]pos) error {
	arr, ok := v.([]any)
	if !ok {
		return d.typeError(path, "an array of tables ([[...rules]])", v)
	}
	for i, e := range arr {
		p := append(slices.Clone(path), index(i))
		tbl, ok := e.(map[string]any)
		if !ok {
			return d.typeError(p, "a table with tool, pattern and action", e)
		}
		r := PermissionRule{Pattern: "*"}
		for _, k := range sortedKeys(tbl) {
			kp := append(slices.Clone(p), k)
			str, isStr := tbl[k].(string)
			switch k {
			case "tool", "pattern", "action":
				if !isStr {
					return d.typeError(kp, "a string", tbl[k])
				}
			default:
				return d.unknownKey(kp, []string{"tool", "pattern", "action"})
			}
			switch k {
			case "tool":
				if strings.TrimSpace(str) == "" {
					return &Error{Pos: d.valPos(kp), Msg: "bad value for " + keyPath(kp...) + ": empty tool name", Hint: `e.g. "bash", "edit", "read", "webfetch" or "*"`}
				}
				r.Tool = str
			case "pattern":
				if err := checkPattern(str); err != nil {
					return &Error{Pos: d.valPos(kp), Msg: "bad value for " + keyPath(kp...) + ": " + err.Error(), Hint: `"*" matches any text, "**" any path`}
				}
				r.Pattern = str
			case "action":
				if !slices.Contains(actionNames, str) {
					return &Error{Pos: d.valPos(kp), Msg: fmt.Sprintf("bad value for %s: %q", keyPath(kp...), str), Hint: "one of: allow, deny, ask"}
				}
				r.Action = Action(str)
			}
		}
		rp := d.keyPos(p)
		if r.Tool == "" || r.Action == "" {
			return &Error{Pos: rp, Msg: keyPath(p...) + " needs both tool and action", Hint: `e.g. tool = "bash", pattern = "git *", action = "allow"`}
		}
		r.Source = rp.String()
		*rules = append(*rules, r)
		*ps = append(*ps, rp)
	}
	return nil
}

func (d *doc) decodeAgents(l *layer, tbl map[string]any) error {
	for _, name := range sortedKeys(tbl) {
		path := []string{"agent", name}
		at, ok := tbl[name].(map[string]any)
		if !ok {
			return d.typeError(path, "a table ([agent.NAME.permission])", tbl[name])
		}
		a := &agentLayer{}
		for _, k := range sortedKeys(at) {
			if k == "profile" {
				if err := d.decodeAgentTable(l, name, "profile", profileKeys, at[k]); err != nil {
					return err
				}
				continue
			}
			if k == "command" {
				if err := d.decodeAgentTable(l, name, "command", commandKeys, at[k]); err != nil {
					return err
				}
				continue
			}
			if k != "permission" {
				return d.unknownKey(append(slices.Clone(path), k), []string{"command", "permission", "profile"})
			}
			pp := append(slices.Clone(path), k)
			pt, ok := at[k].(map[string]any)
			if !ok {
				return d.typeError(pp, "a table", at[k])
			}
			for _, pk := range sortedKeys(pt) {
				kp := append(slices.Clone(pp), pk)
				switch pk {
				case "default":
					s, err := d.decodeValue(kp, schema()["permissions.default"], pt[pk])
					if err != nil {
						return err
					}
					a.def = &s
				case "rules":
					if err := d.decodeRules(kp, pt[pk], &a.rules, &a.pos); err != nil {
						return err
					}
				default:
					return d.unknownKey(kp, []string{"default", "rules"})
				}
			}
		}
		l.agents[name] = a
	}
	return nil
}

func (d *doc) decodeManaged(l *layer, tbl map[string]any) error {
	for _, k := range sortedKeys(tbl) {
		path := []string{"managed", k}
		if k != "locked" {
			return d.unknownKey(path, []string{"locked"})
		}
		if !l.managed {
			return &Error{Pos: d.keyPos(path), Msg: "managed.locked is only honoured in managed policy", Hint: "move it to /etc/oxsupervise/policy.toml or policy.d/*.toml"}
		}
		s, err := d.decodeValue(path, keySpec{kind: kindStrings, enum: lockable()}, tbl[k])
		if err != nil {
			return err
		}
		for i, name := range s.val.([]string) {
			l.locks[name] = s.elems[i]
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

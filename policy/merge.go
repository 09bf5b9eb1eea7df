package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// merged is the result of applying the layers in order.
type merged struct {
	eff map[string]setting
	// locks maps every locked key to the [managed] entry that locked it.
	locks map[string]pos
	// lockedVal is each locked key's value when the managed layers ended:
	// lower layers are compared with it, so tightening then loosening back
	// is still refused.
	lockedVal map[string]setting
	rules     []PermissionRule
	agents    map[string]*agentLayer
	files     []string
	sealed    bool
	// defs are the built-in defaults, built on the first get: get is
	// asked for every key (effective, compile), and building the map for
	// each was 40% of a run request's policy step (issue 18).
	defs map[string]any
}

func newMerged() *merged {
	return &merged{eff: map[string]setting{}, locks: map[string]pos{}, lockedVal: map[string]setting{}, agents: map[string]*agentLayer{}}
}

// get returns a key's effective setting, or its default.
func (m *merged) get(key string) setting {
	if s, ok := m.eff[key]; ok {
		return s
	}
	if m.defs == nil {
		m.defs = defaults()
	}
	v := m.defs[key]
	if l, ok := v.([]string); ok {
		// Each caller gets its own list, as when defaults() was built
		// per call: none may change another's (or the next get's).
		v = slices.Clone(l)
	}
	return setting{val: v, src: "default"}
}

func (m *merged) str(key string) string       { return m.get(key).val.(string) }
func (m *merged) boolean(key string) bool     { return m.get(key).val.(bool) }
func (m *merged) integer(key string) int64    { return m.get(key).val.(int64) }
func (m *merged) strings(key string) []string { return m.get(key).val.([]string) }

// seal ends the managed layers: from now on locks apply.
func (m *merged) seal() {
	if m.sealed {
		return
	}
	m.sealed = true
	for key := range m.locks {
		if _, ok := schema()[key]; ok {
			m.lockedVal[key] = m.get(key)
		}
	}
}

func fmtVal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func (m *merged) apply(l *layer) error {
	if l.managed {
		if m.sealed {
			return fmt.Errorf("internal error: managed layer %s after user layers", l.name)
		}
		for name, p := range l.locks {
			for _, key := range expandLock(name) {
				m.locks[key] = p
			}
		}
	} else {
		m.seal()
	}
	sch := schema()
	for _, key := range sortedKeys(l.settings) {
		s := l.settings[key]
		spec := sch[key]
		if !l.managed {
			if key == "sandbox.allowed_modes" {
				cur := m.get(key)
				if spec.looser(cur.val, s.val) {
					return &Error{Pos: s.pos, Msg: fmt.Sprintf("sandbox.allowed_modes = %s would widen %s", fmtVal(s.val), fmtVal(cur.val)), Related: ptr(posOrSrc(cur)), RelatedWhat: "set by", Hint: "a lower layer may only narrow allowed_modes"}
				}
			}
			if lp, locked := m.locks[key]; locked {
				lv := m.lockedVal[key]
				if spec.looser(lv.val, s.val) {
					if spec.tighten == tightenSubset {
						// Point at the first added entry, not the whole list.
						for i, v := range s.val.([]string) {
							if !slices.Contains(lv.val.([]string), v) && i < len(s.elems) && s.elems[i].Line != 0 {
								s.pos = s.elems[i]
								break
							}
						}
					}
					return m.lockError(key, s, lv, lp, spec.tightenHint(key))
				}
			}
		}
		m.eff[key] = s
	}
	if !l.managed {
		_, rulesLocked := m.locks["permissions.rules"]
		for i, r := range l.rules {
			if rulesLocked && r.Action == ActionAllow {
				return m.lockError("permissions.rules", setting{val: r, pos: l.rulePos[i]}, setting{}, m.locks["permissions.rules"], "permissions.rules is locked; lower layers may only add deny or ask rules")
			}
		}
	}
	m.rules = append(m.rules, l.rules...)
	// Agent rules replace global rules with the same tool and pattern, so
	// locking the global rules locks agent overrides too.
	_, agentsLocked := m.locks["agent"]
	if _, ok := m.locks["permissions.rules"]; ok {
		agentsLocked = true
	}
	for _, name := range sortedKeys(l.agents) {
		a := l.agents[name]
		if !l.managed && agentsLocked {
			for i, r := range a.rules {
				if r.Action == ActionAllow {
					lp, ok := m.locks["agent"]
					if !ok {
						lp = m.locks["permissions.rules"]
					}
					return m.lockError(keyPath("agent", name, "permission", "rules"), setting{val: r, pos: a.pos[i]}, setting{}, lp, "agent overrides are locked; lower layers may only add deny or ask rules")
				}
			}
		}
		if !l.managed && a.def != nil {
			if lp, locked := m.locks["permissions.default"]; locked {
				if sch["permissions.default"].looser(m.lockedVal["permissions.default"].val, a.def.val) {
					return m.lockError("permissions.default", *a.def, m.lockedVal["permissions.default"], lp, "agent defaults may not be looser than the locked permissions.default")
				}
			}
		}
		cur := m.agents[name]
		if cur == nil {
			cur = &agentLayer{}
			m.agents[name] = cur
		}
		if a.def != nil {
			cur.def = a.def
		}
		cur.rules = append(cur.rules, a.rules...)
		cur.pos = append(cur.pos, a.pos...)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func posOrSrc(s setting) pos {
	if s.pos.File != "" {
		return s.pos
	}
	return pos{File: s.source()}
}

func (m *merged) lockError(key string, s, locked setting, lockPos pos, hint string) error {
	val := s.val
	if r, ok := val.(PermissionRule); ok {
		val = map[string]string{"tool": r.Tool, "pattern": r.Pattern, "action": string(r.Action)}
	}
	msg := fmt.Sprintf("%s = %s loosens a key locked by managed policy", key, fmtVal(val))
	if locked.val != nil && locked.source() != "" {
		msg += fmt.Sprintf(" (locked value %s from %s)", fmtVal(locked.val), locked.source())
	}
	return &Error{Pos: posOrSrc(s), Msg: msg, Related: &lockPos, RelatedWhat: "locked at", Hint: hint}
}

// effective renders every key for `policy show`.
func (m *merged) effective() *Effective {
	e := &Effective{Files: slices.Clone(m.files)}
	if e.Files == nil {
		e.Files = []string{}
	}
	for key := range defaults() {
		s := m.get(key)
		_, locked := m.locks[key]
		e.Values = append(e.Values, EffectiveValue{Key: key, Value: s.val, Source: s.source(), Locked: locked})
	}
	for _, r := range m.rules {
		_, locked := m.locks["permissions.rules"]
		e.Values = append(e.Values, EffectiveValue{Key: "permissions.rules", Value: map[string]string{"tool": r.Tool, "pattern": r.Pattern, "action": string(r.Action)}, Source: r.Source, Locked: locked})
	}
	for _, name := range sortedKeys(m.agents) {
		a := m.agents[name]
		_, locked := m.locks["agent"]
		if a.def != nil {
			e.Values = append(e.Values, EffectiveValue{Key: keyPath("agent", name, "permission", "default"), Value: a.def.val, Source: a.def.source(), Locked: locked})
		}
		for _, r := range a.rules {
			e.Values = append(e.Values, EffectiveValue{Key: keyPath("agent", name, "permission", "rules"), Value: map[string]string{"tool": r.Tool, "pattern": r.Pattern, "action": string(r.Action)}, Source: r.Source, Locked: locked})
		}
	}
	sort.SliceStable(e.Values, func(i, j int) bool { return e.Values[i].Key < e.Values[j].Key })
	return e
}

// lockedNames lists the locked keys, sorted.
func (m *merged) lockedNames() []string {
	out := sortedKeys(m.locks)
	return slices.DeleteFunc(out, func(s string) bool { return strings.TrimSpace(s) == "" })
}

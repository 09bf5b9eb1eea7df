package launcher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The spec's encoding on the spec channel. It is not JSON: in the
// launcher, a fresh process that decodes one spec and execs, encoding/json
// decoded a 4 KB spec in ~0.6 ms (its per-type reflection caches built and
// its code paged in on the way to the exec gate), and the supervisor paid
// a first encode of the same types; this reflects on nothing and takes
// ~0.1 ms in the launcher (its first allocations, mostly) and microseconds
// in the supervisor.
//
// A struct is a sequence of fields, each a tag byte (the field's number in
// the tables below: a new field goes at the end of its table, and the
// number of a field removed is not given to another) and its value:
//   - an int: a zig-zag varint (binary.AppendVarint);
//   - a uint64 or uint32: an unsigned varint;
//   - a bool: one byte, 1;
//   - a string: its length (unsigned varint) and its bytes;
//   - a list: its length and its items, each encoded as a field's value;
//   - a struct (Spec.Mounts, Spec.Landlock, an Inode, a Rule): its
//     length and its fields.
//
// A field with the zero value (false, 0, "", an empty list, a nil
// Ruleset) is left out and decodes as that zero value (an empty list as
// nil). Decoding is strict, as the JSON decoding was: a tag the launcher
// does not know (a supervisor of another build asking for a boundary this
// launcher might not build), a tag twice, a bool other than 1, a value out
// of its type's range or a struct that ends inside a field is refused.
// TestSpecWireRoundTrip fails when a field of Spec is left out of the
// tables.

// Spec's fields.
const (
	tagSpecVersion byte = iota + 1
	tagSpecSessionID
	tagSpecPath
	tagSpecArgv
	tagSpecEnv
	tagSpecDir
	tagSpecUID
	tagSpecGID
	tagSpecGroups
	tagSpecCapabilities
	tagSpecMounts
	tagSpecLandlock
	tagSpecRestrictSockets
	tagSpecLoopbackUp
	tagSpecExecGate
	tagSpecNested
)

// MountPlan's fields.
const (
	tagMountsProtected byte = iota + 1
	tagMountsPinned
	tagMountsMasked
	tagMountsReadOnly
	tagMountsReadOnlyView
	tagMountsWritable
	tagMountsPrivateShm
	tagMountsShmReadOnly
	tagMountsShmFD
)

// Inode's fields.
const (
	tagInodePath byte = iota + 1
	tagInodeDev
	tagInodeIno
)

// Ruleset's fields.
const (
	tagRulesetABI byte = iota + 1
	tagRulesetHandledFS
	tagRulesetScoped
	tagRulesetRules
	tagRulesetRestrictFlags
	tagRulesetMasked
)

// Rule's fields.
const (
	tagRulePath byte = iota + 1
	tagRuleAccess
)

// readSpec decodes the spec strictly (decodeSpec): a field this launcher
// does not know, or another SpecVersion, means the supervisor is from
// another build and asks for a boundary this launcher might not build.
func readSpec(body []byte) (Spec, error) {
	spec, err := decodeSpec(body)
	if err != nil {
		return Spec{}, fmt.Errorf("decode launch spec (is the launcher from the same build as oxsupervise?): %w", err)
	}
	if spec.Version != SpecVersion {
		return Spec{}, fmt.Errorf("launch spec version %d, this launcher reads version %d: the launcher and oxsupervise are from different builds", spec.Version, SpecVersion)
	}
	return spec, nil
}

// EncodeSpec is spec, at this build's SpecVersion, in the spec channel's
// wire encoding: how a supervisor hands a nested run the spec it sends
// on to its launcher (host.NestAnswer), which a fresh process decodes
// (DecodeSpec) without encoding/json's reflection.
func EncodeSpec(spec Spec) []byte {
	spec.Version = SpecVersion
	return encodeSpec(&spec)
}

// DecodeSpec decodes what EncodeSpec encoded, as strictly as the launcher
// reads its spec: another build's spec is refused.
func DecodeSpec(body []byte) (Spec, error) { return readSpec(body) }

// encodeSpec is spec in the wire encoding.
func encodeSpec(spec *Spec) []byte {
	var w wireWriter
	w.int(tagSpecVersion, spec.Version)
	w.string(tagSpecSessionID, spec.SessionID)
	w.string(tagSpecPath, spec.Path)
	w.strings(tagSpecArgv, spec.Argv)
	w.strings(tagSpecEnv, spec.Env)
	w.string(tagSpecDir, spec.Dir)
	w.int(tagSpecUID, spec.UID)
	w.int(tagSpecGID, spec.GID)
	w.ints(tagSpecGroups, spec.Groups)
	w.strings(tagSpecCapabilities, spec.Capabilities)
	w.nested(tagSpecMounts, func(w *wireWriter) { encodeMounts(w, &spec.Mounts) })
	if spec.Landlock != nil {
		// Present even when empty: a nil Ruleset and an empty one are
		// told apart, as they were.
		w.tag(tagSpecLandlock)
		w.body(func(w *wireWriter) { encodeRuleset(w, spec.Landlock) })
	}
	w.bool(tagSpecRestrictSockets, spec.RestrictSockets)
	w.bool(tagSpecLoopbackUp, spec.LoopbackUp)
	w.bool(tagSpecExecGate, spec.ExecGate)
	w.bool(tagSpecNested, spec.Nested)
	return w.b
}

func encodeMounts(w *wireWriter, m *MountPlan) {
	if len(m.Protected) > 0 {
		w.tag(tagMountsProtected)
		w.uint(uint64(len(m.Protected)))
		for i := range m.Protected {
			w.body(func(w *wireWriter) {
				w.string(tagInodePath, m.Protected[i].Path)
				w.uint64(tagInodeDev, m.Protected[i].Dev)
				w.uint64(tagInodeIno, m.Protected[i].Ino)
			})
		}
	}
	w.strings(tagMountsPinned, m.Pinned)
	w.strings(tagMountsMasked, m.Masked)
	w.strings(tagMountsReadOnly, m.ReadOnly)
	w.bool(tagMountsReadOnlyView, m.ReadOnlyView)
	w.strings(tagMountsWritable, m.Writable)
	w.bool(tagMountsPrivateShm, m.PrivateShm)
	w.bool(tagMountsShmReadOnly, m.ShmReadOnly)
	w.int(tagMountsShmFD, m.ShmFD)
}

func encodeRuleset(w *wireWriter, r *Ruleset) {
	w.int(tagRulesetABI, r.ABI)
	w.uint64(tagRulesetHandledFS, r.HandledFS)
	w.uint64(tagRulesetScoped, r.Scoped)
	if len(r.Rules) > 0 {
		w.tag(tagRulesetRules)
		w.uint(uint64(len(r.Rules)))
		for i := range r.Rules {
			w.body(func(w *wireWriter) {
				w.string(tagRulePath, r.Rules[i].Path)
				w.uint64(tagRuleAccess, r.Rules[i].Access)
			})
		}
	}
	w.uint64(tagRulesetRestrictFlags, uint64(r.RestrictFlags))
	w.strings(tagRulesetMasked, r.Masked)
}

// decodeSpec decodes a spec in the wire encoding, strictly.
func decodeSpec(b []byte) (Spec, error) {
	var s Spec
	err := decodeFields(b, "spec", func(tag byte, r *wireReader) bool {
		switch tag {
		case tagSpecVersion:
			s.Version = r.int()
		case tagSpecSessionID:
			s.SessionID = r.string()
		case tagSpecPath:
			s.Path = r.string()
		case tagSpecArgv:
			s.Argv = r.strings()
		case tagSpecEnv:
			s.Env = r.strings()
		case tagSpecDir:
			s.Dir = r.string()
		case tagSpecUID:
			s.UID = r.int()
		case tagSpecGID:
			s.GID = r.int()
		case tagSpecGroups:
			n := r.count()
			for i := 0; i < n && r.err == nil; i++ {
				s.Groups = append(s.Groups, r.int())
			}
		case tagSpecCapabilities:
			s.Capabilities = r.strings()
		case tagSpecMounts:
			r.nested(func(b []byte) error { return decodeMounts(b, &s.Mounts) })
		case tagSpecLandlock:
			s.Landlock = &Ruleset{}
			r.nested(func(b []byte) error { return decodeRuleset(b, s.Landlock) })
		case tagSpecRestrictSockets:
			s.RestrictSockets = r.bool()
		case tagSpecLoopbackUp:
			s.LoopbackUp = r.bool()
		case tagSpecExecGate:
			s.ExecGate = r.bool()
		case tagSpecNested:
			s.Nested = r.bool()
		default:
			return false
		}
		return true
	})
	if err != nil {
		return Spec{}, err
	}
	return s, nil
}

func decodeMounts(b []byte, m *MountPlan) error {
	return decodeFields(b, "mounts", func(tag byte, r *wireReader) bool {
		switch tag {
		case tagMountsProtected:
			n := r.count()
			for i := 0; i < n && r.err == nil; i++ {
				var in Inode
				r.nested(func(b []byte) error { return decodeInode(b, &in) })
				m.Protected = append(m.Protected, in)
			}
		case tagMountsPinned:
			m.Pinned = r.strings()
		case tagMountsMasked:
			m.Masked = r.strings()
		case tagMountsReadOnly:
			m.ReadOnly = r.strings()
		case tagMountsReadOnlyView:
			m.ReadOnlyView = r.bool()
		case tagMountsWritable:
			m.Writable = r.strings()
		case tagMountsPrivateShm:
			m.PrivateShm = r.bool()
		case tagMountsShmReadOnly:
			m.ShmReadOnly = r.bool()
		case tagMountsShmFD:
			m.ShmFD = r.int()
		default:
			return false
		}
		return true
	})
}

func decodeInode(b []byte, in *Inode) error {
	return decodeFields(b, "protected path", func(tag byte, r *wireReader) bool {
		switch tag {
		case tagInodePath:
			in.Path = r.string()
		case tagInodeDev:
			in.Dev = r.uint()
		case tagInodeIno:
			in.Ino = r.uint()
		default:
			return false
		}
		return true
	})
}

func decodeRuleset(b []byte, rs *Ruleset) error {
	return decodeFields(b, "landlock", func(tag byte, r *wireReader) bool {
		switch tag {
		case tagRulesetABI:
			rs.ABI = r.int()
		case tagRulesetHandledFS:
			rs.HandledFS = r.uint()
		case tagRulesetScoped:
			rs.Scoped = r.uint()
		case tagRulesetRules:
			n := r.count()
			for i := 0; i < n && r.err == nil; i++ {
				var rule Rule
				r.nested(func(b []byte) error { return decodeRule(b, &rule) })
				rs.Rules = append(rs.Rules, rule)
			}
		case tagRulesetRestrictFlags:
			v := r.uint()
			if v > math.MaxUint32 {
				r.fail(fmt.Errorf("restrict flags %#x beyond 32 bits", v))
			}
			rs.RestrictFlags = uint32(v)
		case tagRulesetMasked:
			rs.Masked = r.strings()
		default:
			return false
		}
		return true
	})
}

func decodeRule(b []byte, rule *Rule) error {
	return decodeFields(b, "rule", func(tag byte, r *wireReader) bool {
		switch tag {
		case tagRulePath:
			rule.Path = r.string()
		case tagRuleAccess:
			rule.Access = r.uint()
		default:
			return false
		}
		return true
	})
}

// wireWriter appends fields to b.
type wireWriter struct{ b []byte }

func (w *wireWriter) tag(t byte)    { w.b = append(w.b, t) }
func (w *wireWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *wireWriter) str(s string)  { w.uint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *wireWriter) signed(v int)  { w.b = binary.AppendVarint(w.b, int64(v)) }
func (w *wireWriter) bool(t byte, v bool) {
	if v {
		w.b = append(w.b, t, 1)
	}
}

func (w *wireWriter) int(t byte, v int) {
	if v != 0 {
		w.tag(t)
		w.signed(v)
	}
}

func (w *wireWriter) uint64(t byte, v uint64) {
	if v != 0 {
		w.tag(t)
		w.uint(v)
	}
}

func (w *wireWriter) string(t byte, s string) {
	if s != "" {
		w.tag(t)
		w.str(s)
	}
}

func (w *wireWriter) strings(t byte, l []string) {
	if len(l) > 0 {
		w.tag(t)
		w.uint(uint64(len(l)))
		for _, s := range l {
			w.str(s)
		}
	}
}

func (w *wireWriter) ints(t byte, l []int) {
	if len(l) > 0 {
		w.tag(t)
		w.uint(uint64(len(l)))
		for _, v := range l {
			w.signed(v)
		}
	}
}

// nested writes a struct field (f writes its fields), left out when it has
// none.
func (w *wireWriter) nested(t byte, f func(*wireWriter)) {
	var sub wireWriter
	f(&sub)
	if len(sub.b) > 0 {
		w.tag(t)
		w.uint(uint64(len(sub.b)))
		w.b = append(w.b, sub.b...)
	}
}

// body writes a struct's length and fields (f writes them).
func (w *wireWriter) body(f func(*wireWriter)) {
	var sub wireWriter
	f(&sub)
	w.uint(uint64(len(sub.b)))
	w.b = append(w.b, sub.b...)
}

// wireReader reads values from b; the first error sticks.
type wireReader struct {
	b   []byte
	err error
}

var errShort = errors.New("ends inside a value")

func (r *wireReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *wireReader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) int() int {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	if v != int64(int(v)) {
		r.fail(fmt.Errorf("integer %d out of range", v))
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *wireReader) bool() bool {
	if len(r.b) == 0 {
		r.fail(errShort)
		return false
	}
	v := r.b[0]
	r.b = r.b[1:]
	if v != 1 {
		r.fail(fmt.Errorf("bool %d", v))
	}
	return v == 1
}

// bytes reads a length and that many bytes.
func (r *wireReader) bytes() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *wireReader) string() string { return string(r.bytes()) }

// count reads a list's length, which cannot exceed the bytes left (every
// item takes at least one).
func (r *wireReader) count() int {
	n := r.uint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail(errShort)
		return 0
	}
	return int(n)
}

func (r *wireReader) strings() []string {
	n := r.count()
	var l []string
	for i := 0; i < n && r.err == nil; i++ {
		l = append(l, r.string())
	}
	return l
}

// nested reads a struct's length and decodes its fields with decode.
func (r *wireReader) nested(decode func([]byte) error) {
	b := r.bytes()
	if r.err != nil {
		return
	}
	if err := decode(b); err != nil {
		r.fail(err)
	}
}

// decodeFields decodes the fields of the struct what in b: field decodes
// the value of tag from r, and returns false for a tag it does not know.
func decodeFields(b []byte, what string, field func(tag byte, r *wireReader) bool) error {
	r := wireReader{b: b}
	var seen [256]bool
	for len(r.b) > 0 {
		tag := r.b[0]
		r.b = r.b[1:]
		if seen[tag] {
			return fmt.Errorf("%s: field %d twice", what, tag)
		}
		seen[tag] = true
		if !field(tag, &r) {
			return fmt.Errorf("%s: unknown field %d", what, tag)
		}
		if r.err != nil {
			return fmt.Errorf("%s: field %d: %w", what, tag, r.err)
		}
	}
	return nil
}

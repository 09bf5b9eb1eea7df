package launcher

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// fill sets every field reachable from v to a value of its own, none of
// them zero: a field the wire encoding leaves out then comes back zero.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i), n)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), n)
		fill(v.Index(1), n)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d=\x00\"é", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		// Negative too: ints are zig-zag varints.
		if *n%2 == 0 {
			v.SetInt(-int64(*n))
		} else {
			v.SetInt(int64(*n) << 40)
		}
	case reflect.Uint64, reflect.Uint32:
		v.SetUint(uint64(*n)<<28 | 1)
	default:
		panic(fmt.Sprintf("fill: a field of kind %s: teach the wire encoding and this test", v.Kind()))
	}
}

// TestSpecWireRoundTrip: every field of Spec, set, decodes as it was
// encoded (a field added to Spec and not to the wire encoding fails here),
// and so do the zero spec and an empty Ruleset, which stays non-nil.
func TestSpecWireRoundTrip(t *testing.T) {
	var full Spec
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"every field", full},
		{"zero", Spec{}},
		{"empty ruleset", Spec{Version: SpecVersion, Landlock: &Ruleset{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeSpec(encodeSpec(&tc.spec))
			if err != nil {
				t.Fatalf("decodeSpec: %v", err)
			}
			if !reflect.DeepEqual(got, tc.spec) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, tc.spec)
			}
		})
	}
}

// wireSpec is the encoding of a small valid spec with extra appended to
// its fields, and extraMounts to its mount plan's.
func wireSpec(extra, extraMounts []byte) []byte {
	var w wireWriter
	w.int(tagSpecVersion, SpecVersion)
	w.string(tagSpecPath, "/bin/true")
	w.nested(tagSpecMounts, func(w *wireWriter) {
		w.bool(tagMountsReadOnlyView, true)
		w.b = append(w.b, extraMounts...)
	})
	return append(w.b, extra...)
}

// TestReadSpec: a spec from another build (another version, a field this
// launcher does not know, another encoding) or one that is damaged is
// refused, not half read.
func TestReadSpec(t *testing.T) {
	withVersion := func(v int) []byte {
		var w wireWriter
		w.int(tagSpecVersion, v)
		w.string(tagSpecPath, "/bin/true")
		return w.b
	}
	for _, tc := range []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{"this version", wireSpec(nil, nil), ""},
		{"no version", withVersion(0), "launch spec version 0"},
		{"another version", withVersion(2), "launch spec version 2"},
		{"unknown field", wireSpec([]byte{200, 1}, nil), "spec: unknown field 200"},
		{"unknown field of the mounts", wireSpec(nil, []byte{99, 1}), "mounts: unknown field 99"},
		{"field twice", wireSpec([]byte{tagSpecExecGate, 1, tagSpecExecGate, 1}, nil), "field 15 twice"},
		{"bool not 1", wireSpec([]byte{tagSpecExecGate, 2}, nil), "bool 2"},
		{"string cut short", wireSpec([]byte{tagSpecDir, 10, '/'}, nil), "ends inside a value"},
		{"list longer than the spec", wireSpec([]byte{tagSpecArgv, 100, 1, 'a'}, nil), "ends inside a value"},
		{"JSON", []byte(`{"version":3,"path":"/bin/true"}`), "unknown field 123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := readSpec(tc.body)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("readSpec: %v", err)
			case tc.wantErr == "":
				if spec.Path != "/bin/true" || !spec.Mounts.ReadOnlyView {
					t.Errorf("readSpec = %+v, want the path and the read-only view", spec)
				}
			case err == nil || !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("readSpec: %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// TestEncodeSpecForNestedRun: what a supervisor hands a nested run
// (EncodeSpec) decodes there (DecodeSpec) as the spec it was, at this
// build's version whatever the spec's Version said; a body of another
// build is refused as the launcher refuses it.
func TestEncodeSpecForNestedRun(t *testing.T) {
	var full Spec
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	full.Version = 0
	got, err := DecodeSpec(EncodeSpec(full))
	if err != nil {
		t.Fatalf("DecodeSpec: %v", err)
	}
	want := full
	want.Version = SpecVersion
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if full.Version != 0 {
		t.Errorf("EncodeSpec changed its argument's Version to %d", full.Version)
	}
	var w wireWriter
	w.int(tagSpecVersion, SpecVersion+1)
	if _, err := DecodeSpec(w.b); err == nil || !strings.Contains(err.Error(), "different builds") {
		t.Errorf("DecodeSpec of version %d: %v, want a refusal naming different builds", SpecVersion+1, err)
	}
}

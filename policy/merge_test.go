package policy

import (
	"reflect"
	"testing"
)

// A merge builds the defaults once; every key still answers the built-in
// value, and a list default handed to one caller is not the next one's.
func TestMergedDefaultsPerKey(t *testing.T) {
	m := newMerged()
	for key, want := range defaults() {
		got := m.get(key)
		if got.src != "default" || !reflect.DeepEqual(got.val, want) {
			t.Errorf("get(%q) = %#v from %q, want %#v from default", key, got.val, got.src, want)
		}
	}
	first := m.strings("sandbox.allowed_modes")
	if len(first) == 0 {
		t.Fatal("sandbox.allowed_modes has no default modes")
	}
	first[0] = "changed by a caller"
	if again := m.strings("sandbox.allowed_modes"); again[0] == "changed by a caller" {
		t.Errorf("a caller's change of a default list reached the next get: %q", again)
	}
}

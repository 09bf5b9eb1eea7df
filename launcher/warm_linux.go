//go:build linux

package launcher

import (
	"bytes"
	"encoding/json"
)

// warmSpecDecoding decodes a spec shaped like the supervisor's, as
// readSpec does, while the launcher waits for its own: in a fresh process
// the first decode (encoding/json's per-type caches built, its code paged
// in) took ~0.6 ms between the spec's arrival and the boundary's first
// step, and a launcher that waits for its spec at all waits longer than
// that (a slot's waits for a request; a nested run's for the supervisor's
// answer). It decides nothing: its result is dropped.
func warmSpecDecoding() {
	b, err := json.Marshal(Spec{
		Version: SpecVersion, SessionID: "s", Path: "/", Argv: []string{"a"}, Env: []string{"a=b"}, Dir: "/",
		Groups: []int{1}, Capabilities: []string{"a"},
		Mounts: MountPlan{Protected: []Inode{{Path: "/", Dev: 1, Ino: 1}}, Pinned: []string{"/"}, Masked: []string{"/"},
			ReadOnly: []string{"/"}, Writable: []string{"/"}},
		Landlock: &Ruleset{ABI: 1, HandledFS: 1, Rules: []Rule{{Path: "/", Access: 1}}, Masked: []string{"/"}},
	})
	if err != nil {
		return
	}
	var spec Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	_ = dec.Decode(&spec)
}

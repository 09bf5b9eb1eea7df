//go:build linux

package mkdirdeny

import "testing"

// TestEmbeddedObject checks, on any kernel, that the committed object
// parses and holds what Load looks up by name.
func TestEmbeddedObject(t *testing.T) {
	spec, err := loadMkdirdeny()
	if err != nil {
		t.Fatalf("parse mkdir deny object: %v", err)
	}
	p, ok := spec.Programs[mkdirdenyProgDenyMkdir]
	if !ok {
		t.Fatalf("program %s missing", mkdirdenyProgDenyMkdir)
	}
	if p.SectionName != "lsm/path_mkdir" {
		t.Errorf("program %s in section %q, want %q", mkdirdenyProgDenyMkdir, p.SectionName, "lsm/path_mkdir")
	}
	if _, ok := spec.Maps[mkdirdenyMapDenyMkdirCgroups]; !ok {
		t.Errorf("map %s missing", mkdirdenyMapDenyMkdirCgroups)
	}
}

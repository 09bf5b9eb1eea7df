//go:build linux

package loader

import (
	"testing"

	"github.com/cilium/ebpf"
)

// TestEmbeddedObjects checks, on any kernel, that the committed BPF objects
// parse and contain what the loaders look up by name.
func TestEmbeddedObjects(t *testing.T) {
	probe, err := loadProbe()
	if err != nil {
		t.Fatalf("parse probe object: %v", err)
	}
	tests := []struct {
		name  string
		spec  *ebpf.CollectionSpec
		progs map[string]string // program name -> ELF section
		maps  []string
	}{
		{"probe", probe, map[string]string{probeProgProbeLsmFileOpen: "lsm/file_open", probeProgProbeConnect4: "cgroup/connect4"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, section := range tt.progs {
				p, ok := tt.spec.Programs[name]
				if !ok {
					t.Fatalf("program %s missing", name)
				}
				if p.SectionName != section {
					t.Errorf("program %s in section %q, want %q", name, p.SectionName, section)
				}
			}
			for _, m := range tt.maps {
				if _, ok := tt.spec.Maps[m]; !ok {
					t.Errorf("map %s missing", m)
				}
			}
		})
	}
}

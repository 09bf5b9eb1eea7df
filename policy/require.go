package policy

import "slices"

// Requirement is a kernel mechanism a (managed) policy requires: a machine
// without it refuses to run sessions instead of falling back to a weaker
// boundary.
type Requirement struct {
	// Name is one of requirementNames.
	Name string `json:"name"`
	// Source is the file:line that asked for it.
	Source string `json:"source,omitempty"`
}

// RequireBPFLSM is the requirement that protected names be refused by the
// kernel when created (BPF-LSM), not quarantined after the fact (the
// Landlock path).
const RequireBPFLSM = "bpf-lsm"

var requirementNames = []string{RequireBPFLSM}

func compileRequirements(m *merged) []Requirement {
	s := m.get("sandbox.require")
	var out []Requirement
	for i, n := range s.val.([]string) {
		if !slices.ContainsFunc(out, func(r Requirement) bool { return r.Name == n }) {
			out = append(out, Requirement{Name: n, Source: s.elemSource(i)})
		}
	}
	return out
}

// Requires returns the requirement named name, if the policy has it.
func (c *Compiled) Requires(name string) (Requirement, bool) {
	for _, r := range c.Require {
		if r.Name == name {
			return r, true
		}
	}
	return Requirement{}, false
}

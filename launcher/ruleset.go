package launcher

// Rule grants Access below (or on) Path.
type Rule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
}

// Ruleset is the Landlock ruleset a session needs. It is plain data:
// package landlock plans it from the policy in the supervisor, and the
// launcher enforces it (Prepare, RestrictSelf).
type Ruleset struct {
	ABI int `json:"abi"`
	// HandledFS is zero when the policy has no filesystem rules.
	HandledFS uint64 `json:"handled_fs"`
	Scoped    uint64 `json:"scoped"`
	Rules     []Rule `json:"rules"`
	// RestrictFlags are passed to landlock_restrict_self.
	RestrictFlags uint32 `json:"restrict_flags"`
	// Masked are deny-read anchors inside writable roots. Landlock cannot
	// take read access away below a granted root, so the mount layer hides
	// them instead (see MountPlan).
	Masked []string `json:"masked,omitempty"`
}

// Empty reports whether there is nothing to enforce.
func (r *Ruleset) Empty() bool { return r == nil || (r.HandledFS == 0 && r.Scoped == 0) }

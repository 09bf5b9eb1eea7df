package policy

// ProtectedMatch reports the pattern whose components end at rel's last
// components (rel is a path below a writable root, split into components),
// respecting the entry type; nil when rel names no protected entry. It is
// the one place protected names are matched: the compile-time scan and the
// Landlock path's watch of names created during a session both use it.
func (c *Compiled) ProtectedMatch(rel []string, isDir bool) *ProtectedPattern {
	for i := range c.ProtectedPatterns {
		p := &c.ProtectedPatterns[i]
		n := len(p.Components)
		if n > len(rel) {
			continue
		}
		tail := rel[len(rel)-n:]
		ok := true
		for j, comp := range p.Components {
			if comp != "*" && comp != tail[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if p.Type == EntryDir && !isDir || p.Type == EntryFile && isDir {
			continue
		}
		return p
	}
	return nil
}

// ProtectedPrefix reports the shortest leading part of rel that names a
// protected entry (everything below a protected entry is protected too):
// its length in components and the pattern, or 0 and nil. isDir is the
// type of rel itself; every shorter prefix is a directory.
func (c *Compiled) ProtectedPrefix(rel []string, isDir bool) (int, *ProtectedPattern) {
	for n := 1; n <= len(rel); n++ {
		if p := c.ProtectedMatch(rel[:n], n < len(rel) || isDir); p != nil {
			return n, p
		}
	}
	return 0, nil
}

// ProtectedNames are the last components of the protected patterns (no
// "*"): a created entry whose name is not among them is not protected
// itself, whatever its directory.
func (c *Compiled) ProtectedNames() map[string]bool {
	out := map[string]bool{}
	for _, p := range c.ProtectedPatterns {
		if n := len(p.Components); n > 0 {
			out[p.Components[n-1]] = true
		}
	}
	return out
}

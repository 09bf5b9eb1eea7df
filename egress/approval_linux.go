//go:build linux

package egress

// SetAsk replaces the approver every session resolver of e consults for
// names no rule allows (see Resolver.SetAsk).
func (e *Enforcer) SetAsk(fn AskFunc) { e.resolver.SetAsk(fn) }

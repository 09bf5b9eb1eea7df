//go:build linux

package session

import "github.com/openoxide/oxsupervise/egress"

// SetAsk installs the approver the layer's DNS resolvers consult for names
// no allow entry matches, in sessions whose policy says unknown_hosts =
// "ask" (the daemon's pending approvals). Without one such names are
// refused at once and audited with reason no-approver: a standalone run
// has nobody to ask and must never hang a lookup.
func (l *NetworkLayer) SetAsk(fn egress.AskFunc) { l.enf.SetAsk(fn) }

package windows

import (
	"strings"

	"github.com/openoxide/oxsupervise/audit"
)

// StartRecord is the audit record the runner writes before the command
// starts: the session, its mode, and every guarantee the plan does not
// keep, so a degraded session can never look like a confined one in the
// log. (The audit schema has no dedicated "degraded" kind yet; the missing
// guarantees travel in message and event.reason.)
func (p *Plan) StartRecord(policyDigest string) *audit.Record {
	r := &audit.Record{
		Ox: audit.Ox{
			Kind:         audit.KindSessionStart,
			Session:      p.SessionID,
			Layer:        audit.LayerJob,
			Mode:         string(p.Mode),
			PolicyDigest: policyDigest,
		},
	}
	missing := p.Missing()
	if len(missing) == 0 {
		r.Message = "windows session started; every guarantee of the policy is enforced"
		return r
	}
	names := make([]string, 0, len(missing))
	details := make([]string, 0, len(missing))
	for _, g := range missing {
		names = append(names, g.Name)
		details = append(details, g.Name+": "+g.Detail)
	}
	r.Message = "windows session started DEGRADED; not enforced: " + strings.Join(names, ", ")
	r.Event.Reason = strings.Join(details, "; ")
	return r
}

//go:build linux

package session

import (
	"fmt"
	"io"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/policy"
)

// sessionAudit is a layer's handle on one session's audit log, behind flood
// control. The layers applied from outside (BPF-LSM, network) write
// refusals from their event loops into the session's sink (SessionInfo.Audit).
// w is nil when the log could not be opened: the layer still enforces and
// says that it will not audit.
type sessionAudit struct {
	id, mode string
	sink     *audit.FileSink
	// ownSink is set when the layer opened sink itself (the session came
	// without one) and so closes it.
	ownSink bool
	w       *audit.FloodControl
}

// openSessionAudit puts flood control in front of s's audit sink, opening
// the policy's log when s brings none; what names the refusals in the
// warning printed when it cannot be opened.
func openSessionAudit(s SessionInfo, flood audit.FloodOptions, warn io.Writer, what string) sessionAudit {
	a := sessionAudit{id: s.ID, mode: string(s.Policy.Mode)}
	if s.Audit != nil {
		a.sink = s.Audit
		a.w = audit.NewFloodControl(s.Audit, flood)
		return a
	}
	sink, err := openAuditLog(s.Policy.Audit)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: %s refusals of session %s will NOT be audited: %v\n", what, s.ID, err)
		return a
	}
	a.sink, a.ownSink = sink, true
	a.w = audit.NewFloodControl(sink, flood)
	return a
}

// openAuditLog opens the audit log a policy names (the default one when
// it names none), with the enrichment and journald copy every session
// sink gets.
func openAuditLog(cfg policy.Audit) (*audit.FileSink, error) {
	return openEnrichedAuditLog(cfg, audit.NewEnricher(enrichTimeout))
}

// enrichTimeout bounds the reads of /proc for one audit record.
const enrichTimeout = 50 * time.Millisecond

// openEnrichedAuditLog is openAuditLog with the caller's enricher (which
// it may prefetch into).
func openEnrichedAuditLog(cfg policy.Audit, enrich *audit.Enricher) (*audit.FileSink, error) {
	path := cfg.Path
	if path == "" {
		path = audit.DefaultPath
	}
	return audit.OpenFileSink(path, audit.SinkOptions{Enrich: enrich.Enrich, Journal: journalFor(cfg)})
}

// close writes the session's pending suppressed summary and closes its log.
func (a *sessionAudit) close(warn io.Writer) {
	if a.w != nil {
		if err := a.w.Forget(a.id); err != nil {
			fmt.Fprintf(warn, "oxsupervise: warning: audit record lost: %v\n", err)
		}
	}
	if a.ownSink {
		if err := a.sink.Close(); err != nil {
			fmt.Fprintf(warn, "oxsupervise: warning: audit log: %v\n", err)
		}
	}
}

// flushSuppressed writes the suppressed summaries of every flood control
// in ws (collected under the layer's lock, written outside it).
func flushSuppressed(ws []*audit.FloodControl, warn io.Writer) {
	for _, w := range ws {
		if err := w.Flush(); err != nil {
			fmt.Fprintf(warn, "oxsupervise: warning: audit record lost: %v\n", err)
		}
	}
}

// writeRecord writes r to w; a record that cannot be written is said on
// the terminal, never dropped unseen.
func writeRecord(w audit.Writer, r *audit.Record, warn io.Writer) {
	if err := w.Write(r); err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: audit record lost: %v\n", err)
	}
}

// journalFor is the journald socket records also go to, when the policy
// asks for it.
func journalFor(a policy.Audit) string {
	if a.Journald {
		return audit.JournalSocket
	}
	return ""
}

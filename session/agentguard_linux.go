//go:build linux

package session

import (
	"fmt"
	"io"
	"strings"

	"github.com/openoxide/oxsupervise/agent"
	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/policy"
)

// agentGuard snapshots the program-starting keys of the agent profile's
// state files (Claude Code's mcpServers in ~/.claude.json) before the
// session, so that what the session changed there can be rolled back and
// audited when it ends: the agent may write its state, not add code that
// runs outside the boundary the next time it starts unconfined.
type agentGuard struct {
	snap *agent.Snapshot
	uid  int
}

func startAgentGuard(c *policy.Compiled, env []string, uid int) *agentGuard {
	if c == nil || c.Agent == nil || len(c.Agent.Guarded) == 0 {
		return nil
	}
	p, ok := agent.Lookup(c.Agent.Name)
	if !ok {
		return nil
	}
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" {
		return nil
	}
	return &agentGuard{snap: p.Snapshot(home), uid: uid}
}

// finish rolls back and audits each guarded key the session changed.
func (g *agentGuard) finish(aud *auditor, id, mode string, warn io.Writer) {
	if g == nil {
		return
	}
	rolled, err := g.snap.Restore(g.uid)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: WARNING: %v; check it by hand before running the agent outside a session\n", err)
	}
	for _, r := range rolled {
		fmt.Fprintf(warn, "oxsupervise: agent profile %s: the session changed %s in %s, which starts programs; rolled back\n", r.Profile, r.Key, r.File)
		aud.write(audit.Record{
			Message: fmt.Sprintf("session %s changed %s in %s (profile %s); rolled back", id, r.Key, r.File, r.Profile),
			Event:   audit.Event{Action: "rollback"},
			User:    &audit.User{ID: fmt.Sprint(g.uid)},
			File:    &audit.File{Path: r.File},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: id, Layer: audit.LayerSupervisor, Class: audit.ClassFile,
				Decision: "deny", Mode: mode, Rule: "agent profile " + r.Profile + ": " + r.Key + " starts programs (" + r.Cite + ")"},
		})
	}
}

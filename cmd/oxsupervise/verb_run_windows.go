//go:build windows

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/session"
	"github.com/openoxide/oxsupervise/windows"
)

// runCommand runs r.argv in a Job object with a write-restricted token
// (package windows). Policies whose denied reads or network limits cannot
// be enforced are refused unless --allow-degraded is given.
func runCommand(ctx context.Context, s streams, r runRequest) int {
	if r.user != "" {
		fmt.Fprintln(s.err, "oxsupervise run: boundary not built: --user is not supported on Windows; nothing ran")
		return exitNoBoundary
	}
	t, c, wd, failed := prepareRun(s, r, "")
	if c == nil {
		return failed
	}
	id, err := session.NewID()
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: %v; nothing ran\n", err)
		return exitNoBoundary
	}
	state, err := os.UserCacheDir() // %LocalAppData%: private to the user
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: state directory: %v; nothing ran\n", err)
		return exitNoBoundary
	}
	journals := filepath.Join(state, "oxsupervise", "acl-journal")
	if err := os.MkdirAll(journals, 0o700); err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: %v; nothing ran\n", err)
		return exitNoBoundary
	}
	sink, err := audit.OpenFileSink(c.Audit.Path, audit.SinkOptions{})
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: audit log: %v (use --audit-log PATH); nothing ran\n", err)
		return exitNoBoundary
	}
	defer sink.Close()
	digest, _ := c.Digest()
	code, err := windows.Run(ctx, c, r.argv, windows.RunConfig{
		SessionID:     id,
		AllowDegraded: r.allowDegraded,
		JournalDir:    journals,
		PolicyDigest:  digest,
		Env:           session.ScrubEnv(targetEnv(t), c.Env),
		Dir:           wd,
		Stdin:         os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Audit: sink.Write,
	})
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: %v; nothing ran\n", err)
		return exitNoBoundary
	}
	_ = sink.Write(&audit.Record{Ox: audit.Ox{Kind: audit.KindSessionStop, Session: id, Layer: audit.LayerJob, Mode: string(c.Mode), PolicyDigest: digest}})
	return code
}

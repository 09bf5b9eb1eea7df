//go:build darwin

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/macos"
	"github.com/openoxide/oxsupervise/session"
)

// runCommand runs r.argv under a Seatbelt profile generated from the
// policy (package macos). Seatbelt needs no privilege, so unlike Linux
// this runs as the invoking user; it cannot switch users.
func runCommand(ctx context.Context, s streams, r runRequest) int {
	if r.user != "" || os.Getenv("SUDO_UID") != "" {
		fmt.Fprintln(s.err, "oxsupervise run: boundary not built: on macOS run runs as the invoking user; drop sudo/--user; nothing ran")
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
	sink, err := audit.OpenFileSink(c.Audit.Path, audit.SinkOptions{})
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: audit log: %v (use --audit-log PATH); nothing ran\n", err)
		return exitNoBoundary
	}
	defer sink.Close()
	digest, _ := c.Digest()
	if err := sink.Write(&audit.Record{Ox: audit.Ox{Kind: audit.KindSessionStart, Session: id, Layer: audit.LayerSeatbelt, Mode: string(c.Mode), PolicyDigest: digest}}); err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: audit log: %v; nothing ran\n", err)
		return exitNoBoundary
	}
	code, err := macos.Run(ctx, c, r.argv, macos.RunConfig{
		Options: macos.Options{SessionID: id},
		Env:     session.ScrubEnv(targetEnv(t), c.Env),
		Dir:     wd,
		Stdin:   os.Stdin, Stdout: os.Stdout, Stderr: s.err,
		Audit: sink.Write,
	})
	_ = sink.Write(&audit.Record{Ox: audit.Ox{Kind: audit.KindSessionStop, Session: id, Layer: audit.LayerSeatbelt, Mode: string(c.Mode), PolicyDigest: digest}})
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: boundary not built: %v; nothing ran\n", err)
		return exitNoBoundary
	}
	return code
}

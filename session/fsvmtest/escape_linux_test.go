//go:build linux

package fsvmtest

import (
	"os"
	"testing"

	"github.com/openoxide/oxsupervise/internal/escapetest"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestEscape runs the escape table (package escapetest) inside
// `oxsupervise run` on the BPF-LSM path, the same table package session's
// TestEscape runs on the Landlock path.
func TestEscape(t *testing.T) {
	requireBPFLSM(t)
	cli := os.Getenv(cliEnv)
	if cli == "" {
		testutil.SkipUnlessVM(t, "%s not set: the vmtest runner provides the oxsupervise binary", cliEnv)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	escapetest.Run(t, escapetest.Config{CLI: cli, Self: self})
}

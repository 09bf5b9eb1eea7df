//go:build !darwin

package macos

import (
	"context"
	"errors"
	"testing"
)

func TestRunRefusesOffMacOS(t *testing.T) {
	code, err := Run(context.Background(), workspaceWrite(), []string{"true"}, RunConfig{Options: Options{SessionID: testSession}})
	if !errors.Is(err, ErrNotDarwin) || code != -1 {
		t.Fatalf("Run = %d, %v; want -1, ErrNotDarwin", code, err)
	}
}

//go:build !windows

package windows

import (
	"context"
	"errors"
	"testing"
)

func TestRunRefusesOffWindows(t *testing.T) {
	code, err := Run(context.Background(), workspaceWrite(), []string{"cmd"}, RunConfig{SessionID: testSession})
	if !errors.Is(err, ErrNotWindows) || code != -1 {
		t.Fatalf("Run = %d, %v; want -1, ErrNotWindows", code, err)
	}
}

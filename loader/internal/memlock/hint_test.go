package memlock

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestWithoutHint(t *testing.T) {
	eperm := fmt.Errorf("load program: %w"+hint, syscall.EPERM)
	got := WithoutHint(fmt.Errorf("probe: %w", eperm))
	if want := "probe: load program: operation not permitted"; got.Error() != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if !errors.Is(got, syscall.EPERM) || !errors.Is(got, eperm) {
		t.Errorf("%v no longer wraps EPERM", got)
	}
	plain := errors.New("load program: invalid argument")
	if WithoutHint(plain) != plain || WithoutHint(nil) != nil {
		t.Error("an error without the hint was changed")
	}
}

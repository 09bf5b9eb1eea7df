package ahead

import (
	"errors"
	"testing"
)

// TestValue: what was built is handed over once; Close drops it only when
// nobody took it and it was built.
func TestValue(t *testing.T) {
	errBuild := errors.New("no value")
	tests := []struct {
		name      string
		err       error
		take      bool
		wantDrops int
	}{
		{"taken", nil, true, 0},
		{"never taken", nil, false, 1},
		{"build failed, taken", errBuild, true, 0},
		{"build failed, never taken", errBuild, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drops := 0
			a := Start(func() (int, error) { return 7, tt.err }, func(v int) {
				if v != 7 {
					t.Errorf("dropped %d, want 7", v)
				}
				drops++
			})
			if tt.take {
				v, err, ok := a.Take()
				if !ok || v != 7 || !errors.Is(err, tt.err) {
					t.Errorf("Take = %d, %v, %v; want 7, %v, true", v, err, ok, tt.err)
				}
			}
			a.Close()
			a.Close()
			if _, _, ok := a.Take(); ok {
				t.Error("Take after Close handed the value over")
			}
			if drops != tt.wantDrops {
				t.Errorf("dropped %d times, want %d", drops, tt.wantDrops)
			}
		})
	}
}

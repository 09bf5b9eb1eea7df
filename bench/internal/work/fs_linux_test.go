package work

import (
	"errors"
	"testing"
)

func TestBatchedPerOp(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		failAt  int
		wantErr bool
	}{
		{"exact batches", 1000, -1, false},
		{"partial last batch", 1234, -1, false},
		{"error stops", 1000, 700, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			ns, err := BatchedPerOp(tt.n, func(i int) error {
				if i != calls {
					t.Fatalf("call %d got index %d", calls, i)
				}
				calls++
				if i == tt.failAt {
					return errors.New("boom")
				}
				return nil
			})
			if tt.wantErr {
				if err == nil || calls != tt.failAt+1 {
					t.Fatalf("err = %v after %d calls, want an error after %d", err, calls, tt.failAt+1)
				}
				return
			}
			if err != nil || calls != tt.n || ns <= 0 {
				t.Fatalf("ns=%v err=%v calls=%d, want a positive time and %d calls", ns, err, calls, tt.n)
			}
		})
	}
}

func TestFSMicroReportsEveryMetric(t *testing.T) {
	out, err := FSMicro(t.TempDir(), 600)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range FSMetrics {
		if v, ok := out[m]; !ok || v <= 0 {
			t.Errorf("metric %q = %v, %v; want a positive time", m, v, ok)
		}
	}
	if len(out) != len(FSMetrics) {
		t.Errorf("got %d metrics, want %d", len(out), len(FSMetrics))
	}
}

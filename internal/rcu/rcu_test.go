package rcu

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

func TestParseFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{"0\n", false, false},
		{"1\n", true, false},
		{"2", true, false},
		{"00", false, false},
		{"", false, true},
		{"yes\n", false, true},
		{"-1\n", true, false},
	}
	for _, tt := range tests {
		got, err := ParseFlag("knob", []byte(tt.in))
		if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
			t.Errorf("ParseFlag(%q) = %v, %v; want %v (error: %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestExpedited(t *testing.T) {
	tests := []struct {
		s    Settings
		want bool
	}{
		{Settings{}, false},
		{Settings{ExpeditedSet: true}, true},
		{Settings{NormalSet: true}, false},
		{Settings{ExpeditedSet: true, NormalSet: true}, false},
	}
	for _, tt := range tests {
		if got := tt.s.Expedited(); got != tt.want {
			t.Errorf("%+v.Expedited() = %v, want %v", tt.s, got, tt.want)
		}
	}
}

// Read agrees with the files it reads, where the kernel has them.
func TestReadMatchesSysfs(t *testing.T) {
	e, errE := os.ReadFile(ExpeditedPath)
	n, errN := os.ReadFile(NormalPath)
	if errors.Is(errE, fs.ErrNotExist) || errors.Is(errN, fs.ErrNotExist) {
		s, err := Read()
		if err == nil {
			t.Fatalf("Read() = %+v without %s or %s, want an error", s, ExpeditedPath, NormalPath)
		}
		t.Skipf("SKIP (loud): this kernel has no RCU knobs in sysfs (%v, %v); Read says %v", errE, errN, err)
	}
	if errE != nil || errN != nil {
		t.Fatalf("read the knobs: %v, %v", errE, errN)
	}
	s, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if wantE, wantN := string(e) != "0\n", string(n) != "0\n"; s.ExpeditedSet != wantE || s.NormalSet != wantN {
		t.Fatalf("Read() = %+v, the files hold %q and %q", s, e, n)
	}
}

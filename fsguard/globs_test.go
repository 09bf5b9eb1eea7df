package fsguard

import (
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

func TestCompileGlobs(t *testing.T) {
	tests := []struct {
		name    string
		globs   []policy.NameGlob
		match   map[string]bool // name -> denied
		wantErr bool
	}{
		{"default .env", []policy.NameGlob{{Include: ".env*", Exclude: []string{".env.example"}}},
			map[string]bool{".env": true, ".env.local": true, ".env.example": false, "env": false, "x.env": false}, false},
		{"suffix", []policy.NameGlob{{Include: "*.pem"}}, map[string]bool{"key.pem": true, ".pem": true, "pem": false, "key.pem.bak": false}, false},
		{"prefix and suffix", []policy.NameGlob{{Include: "id_*.key"}}, map[string]bool{"id_rsa.key": true, "id_.key": true, "id.key": false}, false},
		{"exact", []policy.NameGlob{{Include: "credentials"}}, map[string]bool{"credentials": true, "credentials2": false}, false},
		{"question mark", []policy.NameGlob{{Include: ".env?"}}, nil, true},
		{"two stars", []policy.NameGlob{{Include: "*.env*"}}, nil, true},
		{"class", []policy.NameGlob{{Include: "[.]env"}}, nil, true},
		{"slash", []policy.NameGlob{{Include: "a/b"}}, nil, true},
		{"too many", []policy.NameGlob{{Include: "a", Exclude: []string{"b", "c", "d", "e", "f", "g", "h", "i"}}}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slots, err := compileGlobs(tt.globs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("compileGlobs: err %v, wantErr %v", err, tt.wantErr)
			}
			for name, want := range tt.match {
				if got := denied(slots, name); got != want {
					t.Errorf("%q denied = %v, want %v", name, got, want)
				}
			}
		})
	}
}

// denied mirrors bpf/fs.c's leaf_globs.
func denied(slots []globSlot, name string) bool {
	include, excluded := 0, 0
	for k, s := range slots {
		if !s.matches(name) {
			continue
		}
		if s.excludeOf >= 0 {
			excluded |= 1 << s.excludeOf
		} else {
			include |= 1 << k
		}
	}
	return include&^excluded != 0
}

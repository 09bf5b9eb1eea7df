package mountinfo

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Mount
		wantErr bool
	}{
		{"root and escaped point", "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
			"40 22 0:35 /sub /mnt/with\\040space rw - tmpfs tmpfs rw,size=10k\n",
			[]Mount{
				{ID: 22, Parent: 1, Major: 8, Minor: 1, Root: "/", Point: "/", Options: "rw,relatime", FSType: "ext4", Source: "/dev/sda1", SuperOpts: "rw"},
				{ID: 40, Parent: 22, Major: 0, Minor: 35, Root: "/sub", Point: "/mnt/with space", Options: "rw", FSType: "tmpfs", Source: "tmpfs", SuperOpts: "rw,size=10k"},
			}, false},
		{"no separator", "22 1 8:1 / / rw\n", nil, true},
		{"bad device", "22 1 8-1 / / rw - ext4 /dev/sda1 rw\n", nil, true},
		{"short", "22 1 8:1 / - ext4 x\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d mounts, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("mount %d: %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`a\040b`: "a b", `tab\011`: "tab\t", `back\134slash`: `back\slash`, `no\escape`: `no\escape`, `end\04`: `end\04`} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadSelf(t *testing.T) {
	ms, err := Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	found := false
	for _, m := range ms {
		found = found || m.Point == "/"
	}
	if !found {
		t.Fatal("this process's mountinfo has no mount at /")
	}
}

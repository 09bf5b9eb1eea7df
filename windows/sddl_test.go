package windows

import "testing"

func TestDropExplicitACEs(t *testing.T) {
	const sid = "S-1-5-21-1-2-3-4"
	tests := []struct {
		name, in, want string
		removed        int
		protected      bool
	}{
		{name: "allow and deny removed",
			in:      "D:AI(D;OICI;0xd0156;;;S-1-5-21-1-2-3-4)(A;OICI;FA;;;SY)(A;OICI;0x1301bf;;;S-1-5-21-1-2-3-4)(A;OICIID;FA;;;BA)",
			want:    "D:AI(A;OICI;FA;;;SY)(A;OICIID;FA;;;BA)",
			removed: 2},
		{name: "inherited copies kept (the parent's re-propagation removes them)",
			in:      "D:AI(A;OICIID;0x1301bf;;;S-1-5-21-1-2-3-4)(A;;FA;;;SY)",
			want:    "D:AI(A;OICIID;0x1301bf;;;S-1-5-21-1-2-3-4)(A;;FA;;;SY)",
			removed: 0},
		{name: "protected dacl", in: "D:PAI(A;;FA;;;s-1-5-21-1-2-3-4)(A;;FA;;;SY)", want: "D:PAI(A;;FA;;;SY)", removed: 1, protected: true},
		{name: "other sections kept", in: "O:BAG:SYD:(A;;FA;;;S-1-5-21-1-2-3-4)S:(AU;SA;FA;;;WD)", want: "O:BAG:SYD:S:(AU;SA;FA;;;WD)", removed: 1},
		{name: "similar sid kept", in: "D:(A;;FA;;;S-1-5-21-1-2-3-45)", want: "D:(A;;FA;;;S-1-5-21-1-2-3-45)"},
		{name: "conditional ace with parens", in: `D:(XA;;FX;;;S-1-1-0;(@User.Title=="P(M)"))(A;;FA;;;S-1-5-21-1-2-3-4)`,
			want: `D:(XA;;FX;;;S-1-1-0;(@User.Title=="P(M)"))`, removed: 1},
		{name: "no dacl", in: "O:BA", want: "O:BA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, removed, protected, err := dropExplicitACEs(tt.in, sid)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || removed != tt.removed || protected != tt.protected {
				t.Errorf("got %q removed=%d protected=%v; want %q removed=%d protected=%v", got, removed, protected, tt.want, tt.removed, tt.protected)
			}
		})
	}
	if _, _, _, err := dropExplicitACEs("D:(A;;FA;;;SY", sid); err == nil {
		t.Error("unterminated ACE accepted")
	}
}

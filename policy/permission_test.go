package policy

import (
	"slices"
	"testing"
)

func TestSplitBash(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"ls -la", []string{"ls -la"}},
		{"ls && rm -rf ~", []string{"ls", "rm -rf ~"}},
		{"a || b; c | d", []string{"a", "b", "c", "d"}},
		{"(cd x && make)", []string{"cd x", "make"}},
		{"echo $(curl x)", []string{"echo $(curl x)", "curl x"}},
		{"echo `wget y`", []string{"echo $(wget y)", "wget y"}},
		{"diff <(cat a) >(tee b)", []string{"diff <(cat a) >(tee b)", "cat a", "tee b"}},
		{`"r"m -rf '/x'`, []string{"rm -rf /x"}},
		{`r\m -rf /`, []string{"rm -rf /"}},
		{"X=1 env Y=2 rm f", []string{"env Y=2 rm f", "rm f"}},
		{"sudo -u root rm -rf /", []string{"sudo -u root rm -rf /", "rm -rf /"}},
		{"timeout 5 curl x", []string{"timeout 5 curl x", "curl x"}},
		{"bash -c 'rm -rf ~ && ls'", []string{"bash -c rm -rf ~ && ls", "rm -rf ~", "ls"}},
		{"eval 'curl x'", []string{"eval curl x", "curl x"}},
		{"f() { rm -rf /; }; f", []string{"rm -rf /", "f"}},
		{"if true; then curl x; fi", []string{"true", "curl x"}},
		{"export A=$(curl x)", []string{"export A=$(curl x)", "curl x"}},
		{"A=$(curl x)", []string{"curl x"}},
		{"cat <<EOF\n$(rm x)\nEOF\n", []string{"cat", "rm x"}},
		{"[[ -n $(id) ]] && echo $((1+$(wc -l)))", []string{"id", "echo $((1+$(wc -l)))", "wc -l"}},
		{"busybox sh -c 'curl x'", []string{"busybox sh -c curl x", "curl x"}},
		{"", nil},
	}
	for _, tt := range tests {
		got, err := SplitBash(tt.in)
		if err != nil {
			t.Errorf("SplitBash(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("SplitBash(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
	if _, err := SplitBash("echo 'unterminated"); err == nil {
		t.Error("unterminated quote: want a parse error")
	}
}

func TestMatchCommand(t *testing.T) {
	tests := []struct {
		pattern, cmd string
		want         bool
	}{
		{"rm *", "rm -rf /home/x", true},
		{"rm *", "rm", true},
		{"rm *", "rmdir x", false},
		{"git *", "git commit -m x", true},
		{"git commit *", "git push", false},
		{"*", "anything at all", true},
		{"npm run ?est", "npm run test", true},
		{`echo \*`, "echo *", true},
		{`echo \*`, "echo x", false},
		{"curl *example.com*", "curl -s https://api.example.com/x", true},
	}
	for _, tt := range tests {
		if got := matchCommand(tt.pattern, tt.cmd); got != tt.want {
			t.Errorf("matchCommand(%q, %q) = %t", tt.pattern, tt.cmd, got)
		}
	}
}

func TestCheck(t *testing.T) {
	perms := Permissions{
		Default: ActionAsk,
		Rules: []PermissionRule{
			{Tool: "bash", Pattern: "rm *", Action: ActionDeny, Source: "m:1:1"},
			{Tool: "bash", Pattern: "git *", Action: ActionAllow, Source: "u:1:1"},
			{Tool: "bash", Pattern: "ls *", Action: ActionAllow, Source: "u:2:1"},
			{Tool: "bash", Pattern: "git push *", Action: ActionAsk, Source: "u:3:1"},
			{Tool: "read", Pattern: "/home/u/**", Action: ActionAllow, Source: "u:4:1"},
			{Tool: "read", Pattern: "/home/u/**/.env", Action: ActionDeny, Source: "u:5:1"},
			{Tool: "edit", Pattern: "src/*.go", Action: ActionAllow, Source: "u:6:1"},
		},
		Agents: map[string][]PermissionRule{
			"plan": {{Tool: "bash", Pattern: "git *", Action: ActionAsk, Source: "a:1:1"}},
		},
		AgentDefaults: map[string]Action{"build": ActionAllow},
	}
	tests := []struct {
		tool, input, agent string
		want               Action
		rule               string // source of the deciding rule, "" = default
		patterns           []string
	}{
		{"bash", "ls && rm -rf ~", "", ActionDeny, "m:1:1", []string{"ls *", "rm *"}},
		{"bash", "echo $(curl x)", "", ActionAsk, "", []string{"echo *", "curl *"}},
		{"bash", "git status && ls -la", "", ActionAllow, "u:1:1", []string{"git status *", "ls *"}},
		{"bash", "git commit -m 'x' | ls", "", ActionAllow, "u:1:1", []string{"git commit *", "ls *"}},
		{"bash", "git log $(rm -rf /)", "", ActionDeny, "m:1:1", nil},
		{"bash", "sudo rm -rf /", "", ActionDeny, "m:1:1", nil},
		{"bash", "bash -c 'ls; rm x'", "", ActionDeny, "m:1:1", nil},
		{"bash", "git push origin main", "", ActionAllow, "u:1:1", nil}, // allow beats ask
		{"bash", "echo 'unterminated", "", ActionAsk, "", []string{}},
		{"bash", "git status", "plan", ActionAsk, "a:1:1", nil},
		{"bash", "rm x", "plan", ActionDeny, "m:1:1", nil},
		{"bash", "make", "build", ActionAllow, "", nil},
		{"bash", "rm x", "build", ActionDeny, "m:1:1", nil},
		{"read", "/home/u/a/b.txt", "", ActionAllow, "u:4:1", []string{"/home/u/a/b.txt"}},
		{"read", "/home/u/a/.env", "", ActionDeny, "u:5:1", nil},
		{"read", "/etc/passwd", "", ActionAsk, "", nil},
		{"edit", "src/main.go", "", ActionAllow, "u:6:1", nil},
		{"edit", "src/sub/main.go", "", ActionAsk, "", nil}, // * stops at / for paths
		{"webfetch", "https://x", "", ActionAsk, "", nil},
		{"bash", "$CMD -rf /", "build", ActionAsk, "", nil}, // default allow, but the program is unknown
		{"bash", "eval \"$X\"", "build", ActionAsk, "", nil},
		{"bash", "git() { rm -rf /; }; git status", "", ActionDeny, "m:1:1", nil},
	}
	for _, tt := range tests {
		d := perms.Check(tt.tool, tt.input, tt.agent)
		src := ""
		if d.Rule != nil {
			src = d.Rule.Source
		}
		if d.Action != tt.want || src != tt.rule {
			t.Errorf("Check(%s, %q, %q) = %s by %q (%s), want %s by %q", tt.tool, tt.input, tt.agent, d.Action, src, d.Reason, tt.want, tt.rule)
		}
		if tt.patterns != nil && !slices.Equal(d.Patterns, tt.patterns) {
			t.Errorf("Check(%s, %q) patterns %q, want %q", tt.tool, tt.input, d.Patterns, tt.patterns)
		}
	}
	// A deny default is never weakened by an unparsable command.
	strict := Permissions{Default: ActionDeny}
	if d := strict.Check("bash", "echo 'x", ""); d.Action != ActionDeny {
		t.Errorf("unparsable with default deny: %s", d.Action)
	}
}

func TestParseNetRule(t *testing.T) {
	tests := []struct {
		in      string
		host    string
		prefix  string
		ports   []PortRange
		wantErr bool
	}{
		{in: "github.com", host: "github.com"},
		{in: "GitHub.COM.", host: "github.com"},
		{in: "*.npmjs.org", host: "*.npmjs.org"},
		{in: "**.example.com:443", host: "**.example.com", ports: []PortRange{{443, 443}}},
		{in: "bücher.de", host: "xn--bcher-kva.de"},
		{in: "10.0.0.0/8:443", prefix: "10.0.0.0/8", ports: []PortRange{{443, 443}}},
		{in: "10.1.2.3/8", prefix: "10.0.0.0/8"},
		{in: "192.0.2.7:80,8000-8999", prefix: "192.0.2.7/32", ports: []PortRange{{80, 80}, {8000, 8999}}},
		{in: "2001:db8::/32", prefix: "2001:db8::/32"},
		{in: "[2001:db8::1]:22", prefix: "2001:db8::1/128", ports: []PortRange{{22, 22}}},
		{in: "::ffff:1.2.3.4", prefix: "1.2.3.4/32"},
		{in: "", wantErr: true},
		{in: "10.0.0.0/33", wantErr: true},
		{in: "1.2.3.4:0", wantErr: true},
		{in: "1.2.3.4:70000", wantErr: true},
		{in: "x.com:90-80", wantErr: true},
		{in: "a.*.com", wantErr: true},
		{in: "*.com", wantErr: true},
		{in: "*", wantErr: true},
		{in: "bad_host!.com", wantErr: true},
		{in: "[::1", wantErr: true},
		{in: "fe80::1%eth0", wantErr: true},
		{in: "999.1.1.1", wantErr: true},
	}
	for _, tt := range tests {
		r, err := ParseNetRule(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseNetRule(%q) = %+v, want error", tt.in, r)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseNetRule(%q): %v", tt.in, err)
			continue
		}
		gotPrefix := ""
		if r.Prefix.IsValid() {
			gotPrefix = r.Prefix.String()
		}
		if r.Host != tt.host || gotPrefix != tt.prefix || !slices.Equal(r.Ports, tt.ports) {
			t.Errorf("ParseNetRule(%q) = %+v", tt.in, r)
		}
	}
}

func TestMatchHost(t *testing.T) {
	tests := []struct {
		pattern, host string
		want          bool
	}{
		{"github.com", "GitHub.com.", true},
		{"github.com", "api.github.com", false},
		{"*.packages.test", "mirror.packages.test", true},
		{"*.packages.test", "a.b.packages.test", false},
		{"*.packages.test", "packages.test", false},
		{"**.example.com", "a.b.example.com", true},
		{"**.example.com", "example.com", false},
		{"**.example.com", "badexample.com", false},
	}
	for _, tt := range tests {
		if got := MatchHost(tt.pattern, tt.host); got != tt.want {
			t.Errorf("MatchHost(%q, %q) = %t", tt.pattern, tt.host, got)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "1K": 1024, "512M": 512 << 20, "2G": 2 << 30, "2GiB": 2 << 30, "1t": 1 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "G", "-1", "1X", "99999999999T"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): want error", in)
		}
	}
}

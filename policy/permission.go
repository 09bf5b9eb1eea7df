package policy

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// shellTools are tool names whose input is a shell command line, split into
// simple commands before matching.
var shellTools = map[string]bool{"bash": true, "shell": true, "sh": true, "exec": true, "command": true}

// IsShellTool reports whether tool's input is a shell command line.
func IsShellTool(tool string) bool { return shellTools[strings.ToLower(tool)] }

// checkPattern validates a rule pattern for both matchers.
func checkPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty pattern")
	}
	if !doublestar.ValidatePattern(p) {
		return fmt.Errorf("%q is not a valid glob", p)
	}
	return nil
}

// matchCommand matches a shell command against a pattern. Unlike path
// globs, `*` here matches any run of characters including "/" and spaces
// (`rm *` must catch `rm -rf /home/x`), `?` one character, `\` escapes; a
// trailing " *" also matches the bare command (`git *` covers `git`).
// doublestar's `*` stops at "/", which is right for paths and wrong here.
func matchCommand(pattern, cmd string) bool {
	if strings.HasSuffix(pattern, " *") && !strings.HasSuffix(pattern, `\ *`) && wildcard(pattern[:len(pattern)-2], cmd) {
		return true
	}
	return wildcard(pattern, cmd)
}

// wildcard is an iterative glob matcher (linear backtracking on the last
// star), safe on hostile input.
func wildcard(p, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; {
			case c == '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				starP, starS = pi, si
				continue
			case c == '?':
				pi++
				si++
				continue
			case c == '\\' && pi+1 < len(p):
				if p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			case c == s[si]:
				pi++
				si++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func matchTool(pattern, tool string) bool {
	ok, err := doublestar.Match(strings.ToLower(pattern), strings.ToLower(tool))
	return err == nil && ok
}

func matchInput(tool, pattern, input string) bool {
	if IsShellTool(tool) {
		return matchCommand(pattern, input)
	}
	ok, err := doublestar.Match(pattern, input)
	return err == nil && ok
}

// strictness orders actions: deny beats ask beats allow.
func strictness(a Action) int {
	switch a {
	case ActionDeny:
		return 2
	case ActionAsk:
		return 1
	}
	return 0
}

// Decision is the answer to a permission check.
type Decision struct {
	Action Action `json:"action"`
	// Rule decided; nil means the default did.
	Rule *PermissionRule `json:"rule,omitempty"`
	// Reason explains a decision no rule made (default, parse failure).
	Reason string `json:"reason,omitempty"`
	// Commands are the per-command verdicts for shell input.
	Commands []CommandDecision `json:"commands,omitempty"`
	// Patterns are what an "always" approval of this input would store.
	Patterns []string `json:"patterns"`
}

// CommandDecision is one simple command's verdict.
type CommandDecision struct {
	Command string          `json:"command"`
	Action  Action          `json:"action"`
	Rule    *PermissionRule `json:"rule,omitempty"`
	Reason  string          `json:"reason,omitempty"`
}

// RulesFor returns the rules that apply to agent: the global rules, with
// an agent rule replacing a global rule of the same tool and pattern
// ("merges over"), followed by the agent's other rules; and the default.
func (p *Permissions) RulesFor(agent string) ([]PermissionRule, Action) {
	def := p.Default
	if def == "" {
		def = ActionAsk
	}
	if d, ok := p.AgentDefaults[agent]; ok && agent != "" {
		def = d
	}
	own := p.Agents[agent]
	if agent == "" || len(own) == 0 {
		return p.Rules, def
	}
	var out []PermissionRule
	replaced := map[int]bool{}
	for _, g := range p.Rules {
		overridden := false
		for i, a := range own {
			if strings.EqualFold(a.Tool, g.Tool) && a.Pattern == g.Pattern {
				if !replaced[i] {
					out = append(out, a)
					replaced[i] = true
				}
				overridden = true
			}
		}
		if !overridden {
			out = append(out, g)
		}
	}
	for i, a := range own {
		if !replaced[i] {
			out = append(out, a)
		}
	}
	return out, def
}

// decide evaluates one subject: deny rules first, then allow, then ask,
// then the default.
func decide(rules []PermissionRule, def Action, tool, subject string) (Action, *PermissionRule) {
	for _, want := range []Action{ActionDeny, ActionAllow, ActionAsk} {
		for i := range rules {
			r := &rules[i]
			if r.Action == want && matchTool(r.Tool, tool) && matchInput(tool, r.Pattern, subject) {
				rc := *r
				return want, &rc
			}
		}
	}
	return def, nil
}

// Check judges one tool call. For shell tools every simple command is
// judged and the strictest verdict wins; input that cannot be parsed is
// never allowed.
func (p *Permissions) Check(tool, input, agent string) Decision {
	rules, def := p.RulesFor(agent)
	if !IsShellTool(tool) {
		a, r := decide(rules, def, tool, input)
		d := Decision{Action: a, Rule: r, Patterns: []string{input}}
		if r == nil {
			d.Reason = "no rule matched; default " + string(def)
		}
		return d
	}
	cmds, err := SplitBashWords(input)
	if err != nil {
		a := ActionAsk
		if strictness(def) > strictness(a) {
			a = def
		}
		return Decision{Action: a, Reason: fmt.Sprintf("cannot judge: %v", err), Patterns: []string{}}
	}
	if len(cmds) == 0 {
		cmds = [][]string{{}}
	}
	d := Decision{Action: ActionAllow, Patterns: []string{}}
	first := true
	for _, words := range cmds {
		cmd := strings.Join(words, " ")
		a, r := decide(rules, def, tool, cmd)
		cd := CommandDecision{Command: cmd, Action: a, Rule: r}
		if r == nil {
			cd.Reason = "no rule matched; default " + string(def)
		}
		if a == ActionAllow && len(words) > 0 && strings.ContainsAny(words[0], "$`") {
			// The program is computed at run time; no pattern can vouch for it.
			cd.Action, cd.Rule, cd.Reason = ActionAsk, nil, "the command name is computed at run time"
			a, r = cd.Action, nil
		}
		d.Commands = append(d.Commands, cd)
		if first || strictness(a) > strictness(d.Action) {
			d.Action, d.Rule, d.Reason = a, r, cd.Reason
			if cd.Rule == nil {
				d.Reason = fmt.Sprintf("%q: %s", cmd, cd.Reason)
			}
			first = false
		}
		if pat := PrefixPattern(words); pat != "" && !containsStr(d.Patterns, pat) {
			d.Patterns = append(d.Patterns, pat)
		}
	}
	return d
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

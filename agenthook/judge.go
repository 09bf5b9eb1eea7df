package agenthook

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// Options say how Judge answers.
type Options struct {
	Agent Agent
	// Nest rewrites shell commands to run in a nested session with the
	// agent's command tier. The hook's caller sets it when the agent runs
	// inside a session (OXSUPERVISE_SESSION in the hook's environment):
	// outside one there is no parent session to nest in, and the agent's
	// own sandbox is whatever the user chose.
	Nest bool
	// Exe is the oxsupervise executable the rewritten command runs.
	Exe string
}

// Answer is what the hook process writes and how it exits.
type Answer struct {
	// Stdout is the agent's hook output JSON, or empty for "no opinion".
	Stdout []byte
	// Verdict is the permission rules' verdict, for the hook's own log.
	Verdict policy.Action
	// Reason is the text the model (deny) or the user (ask) sees.
	Reason string
	// Rewritten is the command that will run instead, "" when unchanged.
	Rewritten string
}

// hookOutput is the PreToolUse output both agents read.
type hookOutput struct {
	HookSpecificOutput hookSpecific `json:"hookSpecificOutput"`
}

type hookSpecific struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       policy.Action   `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
}

// Judge decides one tool call with the permission rules and answers in
// the agent's format. Errors are bad input; the caller answers them with
// a block (exit 2), never with an allow.
func Judge(in *PreToolUse, perms *policy.Permissions, opts Options) (*Answer, error) {
	call, err := in.Call()
	if err != nil {
		return nil, err
	}
	verdict, reason := judge(call, perms, string(opts.Agent))
	a := &Answer{Verdict: verdict, Reason: reason}

	var updated json.RawMessage
	if call.Command != "" && opts.Nest && verdict != policy.ActionDeny {
		a.Rewritten = NestedCommand(opts.Exe, opts.Agent, call.Command)
		if updated, err = rewriteInput(opts.Agent, in.ToolInput, a.Rewritten); err != nil {
			return nil, err
		}
		a.Reason += "; runs in a nested oxsupervise session with the " + string(opts.Agent) + " command tier (no provider credentials or hosts, no writes to the agent's state)"
	}

	out := hookSpecific{HookEventName: "PreToolUse", PermissionDecision: verdict, PermissionDecisionReason: a.Reason, UpdatedInput: updated}
	if opts.Agent == Codex {
		switch {
		case verdict == policy.ActionAsk:
			// Codex 0.171 refuses "ask" and then runs the tool: say no.
			out.PermissionDecision = policy.ActionDeny
			out.UpdatedInput = nil
			out.PermissionDecisionReason = a.Reason + "; this needs the user's approval and Codex hooks cannot ask: ask the user to run it or to allow it with an oxsupervise permission rule"
		case verdict == policy.ActionAllow && updated == nil:
			// Codex refuses "allow" without updatedInput; no output means
			// the call proceeds on Codex's own rules.
			return a, nil
		}
	}
	if a.Stdout, err = json.Marshal(hookOutput{out}); err != nil {
		return nil, fmt.Errorf("agenthook: encode answer: %w", err)
	}
	return a, nil
}

// judge runs the permission rules on every subject of the call; the
// strictest verdict wins and its reason names the rule (tool, pattern,
// action, file:line) or why the default decided.
func judge(call Call, perms *policy.Permissions, agent string) (policy.Action, string) {
	var verdict policy.Action
	var reason string
	for i, s := range call.Subjects {
		d := perms.Check(call.Tool, s, agent)
		if i > 0 && !d.Action.Stricter(verdict) {
			continue
		}
		verdict, reason = d.Action, describe(call, s, d)
	}
	return verdict, reason
}

func describe(call Call, subject string, d policy.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "oxsupervise: %s", d.Action)
	if d.Rule != nil {
		fmt.Fprintf(&b, " by permission rule {tool = %q, pattern = %q, action = %q}", d.Rule.Tool, d.Rule.Pattern, d.Rule.Action)
		if d.Rule.Source != "" {
			fmt.Fprintf(&b, " at %s", d.Rule.Source)
		}
		// Name the simple command the rule matched inside a longer line.
		for _, c := range d.Commands {
			if c.Rule != nil && *c.Rule == *d.Rule && c.Command != strings.TrimSpace(subject) {
				fmt.Fprintf(&b, " (matched %q)", c.Command)
				break
			}
		}
	} else if d.Reason != "" {
		fmt.Fprintf(&b, ": %s", d.Reason)
	}
	if call.Command == "" && len(call.Subjects) > 1 {
		fmt.Fprintf(&b, " for %s", subject)
	}
	return b.String()
}

// rewriteInput returns the tool input with its command replaced: Claude
// Code replaces the whole input with updatedInput, so every other field
// (description, timeout, run_in_background) is kept as the agent sent
// it; Codex takes {command} only.
func rewriteInput(agent Agent, input json.RawMessage, command string) (json.RawMessage, error) {
	cmd, err := json.Marshal(command)
	if err != nil {
		return nil, err
	}
	if agent == Codex {
		return json.Marshal(map[string]json.RawMessage{"command": cmd})
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(input, &fields); err != nil {
		return nil, fmt.Errorf("%w: tool_input: %v", ErrBadInput, err)
	}
	fields["command"] = cmd
	return json.Marshal(fields)
}

package agenthook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Agent is an agent whose hooks oxsupervise speaks.
type Agent string

const (
	ClaudeCode Agent = "claude-code"
	Codex      Agent = "codex"
)

// Agents lists the agents Parse and Install know, in a stable order.
func Agents() []Agent { return []Agent{ClaudeCode, Codex} }

// ParseAgent maps a command-line name to an Agent.
func ParseAgent(s string) (Agent, error) {
	for _, a := range Agents() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown agent %q (want %s or %s)", s, ClaudeCode, Codex)
}

// PreToolUse is the part of a PreToolUse hook input oxsupervise reads;
// ToolInput is kept raw so that a rewrite can keep every field it does
// not change.
type PreToolUse struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath *string         `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	// Model and TurnID are Codex's.
	Model  string `json:"model,omitempty"`
	TurnID string `json:"turn_id,omitempty"`
}

// maxInput bounds what Parse reads: a tool call's input is at most a few
// megabytes (a file the agent writes); anything larger is refused.
const maxInput = 64 << 20

// ErrBadInput is matched by every error Parse returns.
var ErrBadInput = errors.New("bad hook input")

// Parse reads one PreToolUse input.
func Parse(r io.Reader) (*PreToolUse, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read: %v", ErrBadInput, err)
	}
	if len(b) > maxInput {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadInput, maxInput)
	}
	var in PreToolUse
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if in.HookEventName != "PreToolUse" {
		return nil, fmt.Errorf("%w: hook_event_name %q, want PreToolUse (install the hook under hooks.PreToolUse)", ErrBadInput, in.HookEventName)
	}
	if in.ToolName == "" {
		return nil, fmt.Errorf("%w: no tool_name", ErrBadInput)
	}
	if t := bytes.TrimSpace(in.ToolInput); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: tool_input of %s is not an object", ErrBadInput, in.ToolName)
	}
	return &in, nil
}

// Call is a tool call in the policy's terms: the permission rules' tool
// name and the subjects they match (a command line for shell tools, a
// path for file tools); a call with several subjects (a patch touching
// several files) is judged on each and the strictest verdict wins.
type Call struct {
	Tool     string
	Subjects []string
	// Command is the shell command line of a shell tool, "" otherwise.
	Command string
}

// toolFields maps an agent's file and web tools to the policy's tool
// names and the input field holding the subject (Claude Code's tools:
// https://code.claude.com/docs/en/settings "Tools available to Claude").
var toolFields = map[string]struct{ tool, field string }{
	"Read":         {"read", "file_path"},
	"Write":        {"write", "file_path"},
	"Edit":         {"edit", "file_path"},
	"MultiEdit":    {"edit", "file_path"},
	"NotebookEdit": {"edit", "notebook_path"},
	"WebFetch":     {"webfetch", "url"},
}

// Call maps the hook input to the policy's terms.
func (in *PreToolUse) Call() (Call, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in.ToolInput, &fields); err != nil {
		return Call{}, fmt.Errorf("%w: tool_input: %v", ErrBadInput, err)
	}
	str := func(name string) (string, error) {
		raw, ok := fields[name]
		if !ok {
			return "", fmt.Errorf("%w: %s input has no %q", ErrBadInput, in.ToolName, name)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: %s input %q is not a string", ErrBadInput, in.ToolName, name)
		}
		return s, nil
	}
	switch {
	case in.ToolName == "Bash":
		cmd, err := str("command")
		if err != nil {
			return Call{}, err
		}
		return Call{Tool: "bash", Subjects: []string{cmd}, Command: cmd}, nil
	case in.ToolName == "apply_patch":
		patch, err := str("command")
		if err != nil {
			return Call{}, err
		}
		files := patchFiles(patch)
		if len(files) == 0 {
			return Call{}, fmt.Errorf("%w: apply_patch input names no file", ErrBadInput)
		}
		return Call{Tool: "edit", Subjects: files}, nil
	}
	if tf, ok := toolFields[in.ToolName]; ok {
		s, err := str(tf.field)
		if err != nil {
			return Call{}, err
		}
		return Call{Tool: tf.tool, Subjects: []string{s}}, nil
	}
	// MCP tools and anything else: the tool's own name, its input as JSON
	// text (rules match mcp__server__tool names with any pattern "**").
	return Call{Tool: in.ToolName, Subjects: []string{string(bytes.TrimSpace(in.ToolInput))}}, nil
}

// patchFiles lists the files a Codex patch touches: the targets of its
// "*** Add File:", "*** Update File:", "*** Delete File:" and "*** Move
// to:" lines (codex-rs/apply-patch's grammar).
func patchFiles(patch string) []string {
	var out []string
	for _, line := range strings.Split(patch, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if f, ok := strings.CutPrefix(line, p); ok && strings.TrimSpace(f) != "" {
				out = append(out, strings.TrimSpace(f))
			}
		}
	}
	return out
}

// Package agenthook owns oxsupervise's side of the coding agents' hooks:
// it reads an agent's PreToolUse hook input (Claude Code, Codex), judges
// the tool call with the policy's permission rules (policy.Permissions,
// the one place those rules are evaluated), answers in the agent's own
// output format with a reason the model sees, and rewrites shell commands
// so that they run in a nested session with the agent's command tier
// (`oxsupervise run --tier command -- bash -c '<command>'`). It also
// installs the hook into an agent's user or managed settings (Install),
// idempotently and without disturbing the rest of the file, and turns a
// nested session's audit records into one readable line per refusal for
// the model (FormatRefusal).
//
// The agents' hook contracts, as of the versions the tests were checked
// against:
//
//   - Claude Code 2.1.197 (https://code.claude.com/docs/en/hooks,
//     "PreToolUse"): input {session_id, transcript_path, cwd,
//     permission_mode, hook_event_name, tool_name, tool_input,
//     tool_use_id}; output hookSpecificOutput {hookEventName:
//     "PreToolUse", permissionDecision: allow|deny|ask,
//     permissionDecisionReason, updatedInput}. updatedInput replaces the
//     whole tool input, so every other field of the Bash input
//     (description, timeout, run_in_background) is kept. The reason of a
//     deny is shown to the model, of an ask to the user.
//   - Codex 0.171.0 (github:openai/codex codex-rs/hooks/src/events/
//     pre_tool_use.rs, engine/output_parser.rs, schema/generated/
//     pre-tool-use.command.{input,output}.schema.json): input adds model
//     and turn_id; tool_name is "Bash" for shell commands with tool_input
//     {command}, "apply_patch" for edits (tool_input.command is the
//     patch), mcp__SERVER__TOOL for MCP tools. Codex refuses
//     permissionDecision "ask" and "allow" without updatedInput (the hook
//     run fails and the tool call proceeds: fail open), requires a reason
//     with "deny", and takes updatedInput only as {command: string}.
//     So for Codex an "ask" verdict is answered as a deny whose reason
//     says approval is needed (fail closed), and "allow" without a
//     rewrite is answered with no output (no opinion).
//
// A malformed hook input is answered with exit status 2 and the reason on
// stderr, which both agents treat as a block.
package agenthook

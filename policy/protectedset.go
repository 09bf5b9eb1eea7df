package policy

import (
	"slices"
	"strings"
)

// The built-in protected set (DESIGN §2): the entries below a writable root
// that make a tool run code outside the boundary the next time the user
// works in the project (opens the folder, cds into it, runs git or an
// agent). Each carries the reason `policy show` prints.
//
// What is left out, on purpose: files that are the project's own code or
// build (Makefile, package.json scripts, eslint.config.js, build.rs,
// .cargo/config.toml, .npmrc): the user runs them by building, and an
// agent must edit them for normal work; CI definitions (.github/workflows),
// which run on the CI's machines; editor files guarded by a trust store
// keyed by content (Neovim's .nvim.lua, .exrc); and settings that only
// describe (Aider's .aider.model.metadata.json holds token limits and
// prices, nothing it runs or connects to).

// gitVector is an entry of a git directory whose writer can make git run
// code.
type gitVector struct {
	name, reason string
}

var gitVectors = []gitVector{
	{"hooks", "git runs the scripts in it"},
	{"config", "its core.fsmonitor, core.hooksPath, filters, aliases and includes make git run commands"},
	{"config.worktree", "a worktree's config: the same settings as config"},
	{"commondir", "points git at another directory's config and hooks"},
	{"info", "info/attributes selects the filter and diff drivers git runs"},
}

// protectedName is a built-in pattern protected at any depth below a
// writable root: a name, or a short run of names (".github",
// "copilot-instructions.md").
type protectedName struct {
	path   string // slash-separated components
	reason string
}

// defaultProtectedNames are the agents' and tools' project files. The
// agents' entries follow each agent's documentation of the files it reads
// from a project.
var defaultProtectedNames = []protectedName{
	{".openoxide", "oxsupervise's own workspace policy"},
	// Claude Code.
	{".claude", "Claude Code's project settings: hooks, permissions, MCP servers, commands"},
	{"CLAUDE.md", "instructions Claude Code follows"},
	{"CLAUDE.local.md", "Claude Code's local instructions"},
	{".mcp.json", "MCP servers Claude Code and others start as commands"},
	// Codex, and the AGENTS.md convention (OpenCode, Copilot, Zed, Amp, ...).
	{".codex", "Codex's project config: MCP servers, profiles, approvals"},
	{"AGENTS.md", "instructions Codex, OpenCode and other agents follow"},
	{"AGENTS.override.md", "instructions Codex reads before AGENTS.md"},
	{"AGENT.md", "instructions Amp and Zed follow"},
	{".agents", "skills and instructions agents load"},
	{"CONTEXT.md", "instructions agents load as context"},
	// OpenCode.
	{"opencode.json", "OpenCode's project config: MCP servers, commands, permissions"},
	{"opencode.jsonc", "OpenCode's project config: MCP servers, commands, permissions"},
	{".opencode", "OpenCode's plugins (code it runs), agents, commands and tools"},
	// Aider.
	{".aider.conf.yml", "Aider's config: lint-cmd and test-cmd run commands"},
	{".aider.model.settings.yml", "Aider's model settings: extra_params point it at another API endpoint with the user's key"},
	// Gemini CLI and its fork Qwen Code.
	{"GEMINI.md", "instructions Gemini CLI follows"},
	{".gemini", "Gemini CLI's settings: MCP servers, hooks, tool discovery commands, custom commands"},
	{"QWEN.md", "instructions Qwen Code follows"},
	{".qwen", "Qwen Code's settings: MCP servers, tool discovery commands"},
	// GitHub Copilot.
	{".github/copilot-instructions.md", "instructions GitHub Copilot follows"},
	{".github/instructions", "GitHub Copilot's path-specific instructions"},
	{".github/prompts", "GitHub Copilot's prompt files"},
	// Editors with agents, and other agents.
	{".cursor", "Cursor's rules, MCP servers and hooks"},
	{".cursorrules", "Cursor's rules"},
	{".windsurf", "Windsurf's rules and workflows"},
	{".windsurfrules", "Windsurf's rules"},
	{".clinerules", "Cline's rules and workflows"},
	{".roo", "Roo Code's rules and MCP servers"},
	{".roomodes", "Roo Code's custom modes"},
	{".continue", "Continue's rules, prompts and MCP servers"},
	{".amazonq", "Amazon Q Developer's rules and MCP servers"},
	{".kiro", "Kiro's steering, hooks (commands run on file events) and MCP servers"},
	{".junie", "JetBrains Junie's guidelines and MCP servers"},
	{".rules", "instructions Zed's agent follows"},
	{"CRUSH.md", "instructions Crush follows"},
	{"crush.json", "Crush's config: MCP servers, language servers it starts"},
	{".crush.json", "Crush's config: MCP servers, language servers it starts"},
	{".goosehints", "instructions Goose follows"},
	{"WARP.md", "instructions Warp's agent follows"},
	// Editors and dev environments.
	{".vscode", "tasks.json and settings run commands when the folder opens"},
	{".idea", "JetBrains run configurations and tool paths run commands"},
	{".zed", "Zed's settings start language servers; tasks run commands"},
	{".devcontainer", "devcontainer.json's initializeCommand runs on the host"},
	{".devcontainer.json", "its initializeCommand runs on the host"},
	// Shell environments.
	{".envrc", "direnv runs it on cd"},
	{"mise.toml", "mise runs its hooks and env scripts on cd"},
	{".mise.toml", "mise runs its hooks and env scripts on cd"},
	{"mise.local.toml", "mise runs its hooks and env scripts on cd"},
	{".mise.local.toml", "mise runs its hooks and env scripts on cd"},
	// git and its hook managers. The hooks themselves are in .git (above)
	// or where core.hooksPath points (bind.go protects that directory).
	{".gitmodules", "submodule URLs git fetches and paths it checks out"},
	{".husky", "husky's hook scripts: its core.hooksPath .husky/_ runs them"},
	// .pre-commit-config.yaml is protected always, not only when the
	// repository's hooks are pre-commit's: pre-commit runs what it lists
	// whenever the user runs pre-commit (a hook installed later, a
	// template directory's hook in every new clone, `pre-commit run`), so
	// a repository without the hook today is no safer; and neither path
	// can refuse a not-yet-existing file at one repository's root only
	// (both match names), which for the workspace's own repository is the
	// same as this name. A hook installed with another --config is found
	// at bind time (githooks.go).
	{".pre-commit-config.yaml", "pre-commit runs the hooks it lists from git hooks"},
	{"lefthook.yml", "lefthook runs the commands it lists from git hooks"},
	{".lefthook.yml", "lefthook runs the commands it lists from git hooks"},
	{"lefthook.yaml", "lefthook runs the commands it lists from git hooks"},
	{".lefthook.yaml", "lefthook runs the commands it lists from git hooks"},
	{"lefthook-local.yml", "lefthook runs the commands it lists from git hooks"},
	{".lefthook-local.yml", "lefthook runs the commands it lists from git hooks"},
}

// defaultProtectedPatterns returns the built-in protected set.
func defaultProtectedPatterns(protectGit string) []ProtectedPattern {
	var out []ProtectedPattern
	if protectGit == "all" {
		out = append(out, ProtectedPattern{Components: []string{".git"}, Type: EntryAny, Source: "default (protect_git = \"all\")",
			Reason: "a repository's control directory: its hooks, config and everything git reads"})
	} else {
		// A .git *file* points git at another directory (gitdir:); it must
		// not be rewritten, while a .git directory may be created (git init).
		// git worktree add and submodules create one: allowed, and checked
		// when the session ends (CheckedAtEnd).
		out = append(out, ProtectedPattern{Components: []string{".git"}, Type: EntryFile, Source: "default", CheckedAtEnd: true,
			Reason: "a .git file's gitdir: points git at another directory's config and hooks"})
		// Submodule names may contain one slash level; nesting is covered two
		// deep. Deeper layouts are still caught by the bind-time scan
		// (ProtectedPaths) but not for entries created later.
		prefixes := [][]string{
			{".git"},
			{".git", "modules", "*"},
			{".git", "modules", "*", "*"},
			{".git", "modules", "*", "modules", "*"},
			{".git", "worktrees", "*"},
		}
		for _, p := range prefixes {
			for _, v := range gitVectors {
				c := append(slices.Clone(p), v.name)
				if slices.Equal(c, []string{".git", "worktrees", "*", "commondir"}) {
					// git worktree add writes it: a file may be created
					// and is checked at the session's end; a directory of
					// that name is never git's.
					out = append(out, ProtectedPattern{Components: c, Type: EntryFile, Source: "default", CheckedAtEnd: true, Reason: v.reason},
						ProtectedPattern{Components: slices.Clone(c), Type: EntryDir, Source: "default", Reason: v.reason})
					continue
				}
				out = append(out, ProtectedPattern{Components: c, Type: EntryAny, Source: "default", Reason: v.reason})
			}
		}
	}
	for _, n := range defaultProtectedNames {
		out = append(out, ProtectedPattern{Components: strings.Split(n.path, "/"), Type: EntryAny, Source: "default", Reason: n.reason})
	}
	return out
}

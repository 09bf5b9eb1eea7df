package agent

// Claude Code, npm @anthropic-ai/claude-code (a native binary since 2.x).
// Sources: the settings and environment documentation at
// code.claude.com/docs/en/{settings,env-vars,network-config,mcp,iam} and
// the behaviour of the shipped binary (checked with strace against a
// local stand-in for the API: which files it creates, how it writes
// ~/.claude.json).
const (
	ccDocsEnv      = "https://code.claude.com/docs/en/env-vars"
	ccDocsNet      = "https://code.claude.com/docs/en/network-config"
	ccDocsSettings = "https://code.claude.com/docs/en/settings"
	ccDocsMCP      = "https://code.claude.com/docs/en/mcp"
	ccDocsAuth     = "https://code.claude.com/docs/en/authentication"
	ccDocsSandbox  = "https://code.claude.com/docs/en/sandboxing"
	ccDocsCLI      = "https://code.claude.com/docs/en/cli-reference"
	ccObserved     = "observed: claude 2.1.197 under strace (creates it at start-up)"
)

func claudeCode() *Profile {
	return &Profile{
		Name:     "claude-code",
		Title:    "Claude Code",
		Commands: []string{"claude"},
		Packages: []string{"@anthropic-ai/claude-code"},
		Checked:  []string{"2.1.197"},
		Hosts: []Entry{
			// OAuth token exchange and refresh for claude.ai / Console
			// sign-in (the authorize page opens in the user's browser).
			{"platform.claude.com:443", ccDocsAuth + " (token endpoint platform.claude.com/v1/oauth/token)"},
		},
		Endpoints: func(in Inputs) []Entry {
			if u := in.Env("ANTHROPIC_BASE_URL"); u != "" {
				return []Entry{{u, ccDocsEnv + " (ANTHROPIC_BASE_URL)"}}
			}
			return []Entry{{"https://api.anthropic.com", ccDocsNet + " (api.anthropic.com)"}}
		},
		Credentials: []Entry{
			{"ANTHROPIC_API_KEY", ccDocsEnv},
			{"ANTHROPIC_AUTH_TOKEN", ccDocsEnv},
			{"CLAUDE_CODE_OAUTH_TOKEN", ccDocsEnv},
		},
		Env: []Entry{
			// Equivalent to DISABLE_AUTOUPDATER, DISABLE_BUG_COMMAND,
			// DISABLE_ERROR_REPORTING and DISABLE_TELEMETRY together.
			{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", ccDocsEnv},
			{"DISABLE_AUTOUPDATER=1", ccDocsEnv},
		},
		Args: []Entry{
			// Claude Code's own sandbox (bubblewrap on Linux) cannot start
			// inside a session; --settings takes JSON and ranks above the
			// user's and project's settings, below managed settings.
			{"--settings", ccDocsCLI + " (--settings), " + ccDocsSandbox + " (sandbox.enabled)"},
			{`{"sandbox":{"enabled":false}}`, ccDocsCLI + " (--settings), " + ccDocsSandbox + " (sandbox.enabled)"},
		},
		State: []Entry{
			// Global config: session state, and also MCP servers (see
			// Guarded). Written in place when no temporary file can be
			// created beside it, so $HOME stays read-only.
			{"~/.claude.json", ccDocsSettings + " (~/.claude.json), " + ccObserved},
			{"~/.claude/projects", ccDocsSettings + " (transcripts, cleanupPeriodDays)"},
			{"~/.claude/todos", ccDocsSettings},
			{"~/.claude/plans", ccDocsSettings + " (plansDirectory)"},
			{"~/.claude/shell-snapshots", ccObserved},
			{"~/.claude/session-env", ccObserved},
			{"~/.claude/sessions", ccObserved},
			{"~/.claude/backups", ccObserved + " (backups of ~/.claude.json)"},
			{"~/.claude/file-history", ccDocsSettings + " (checkpoints)"},
			{"~/.claude/paste-cache", ccObserved},
			{"~/.claude/debug", ccDocsCLI + " (--debug writes here)"},
			{"~/.claude/statsig", ccObserved},
			{"~/.claude/history.jsonl", ccDocsSettings + " (prompt history)"},
			{"~/.claude/.credentials.json", ccDocsAuth + " (Linux: ~/.claude/.credentials.json, refreshed tokens)"},
		},
		StateFiles: map[string]string{
			"~/.claude.json":              "{}\n",
			"~/.claude/history.jsonl":     "",
			"~/.claude/.credentials.json": noCreate,
		},
		Rules: []Entry{
			{"~/.claude/settings.json", ccDocsSettings + " (user settings: hooks, permissions, env)"},
			{"~/.claude/settings.local.json", ccDocsSettings},
			{"~/.claude/CLAUDE.md", "https://code.claude.com/docs/en/memory"},
			{"~/.claude/hooks", "https://code.claude.com/docs/en/hooks"},
			{"~/.claude/skills", "https://code.claude.com/docs/en/skills"},
			{"~/.claude/commands", "https://code.claude.com/docs/en/slash-commands"},
			{"~/.claude/agents", "https://code.claude.com/docs/en/sub-agents"},
			{"~/.claude/plugins", "https://code.claude.com/docs/en/plugins"},
			{"~/.claude/output-styles", "https://code.claude.com/docs/en/output-styles"},
			{"/etc/claude-code/managed-settings.json", ccDocsSettings + " (managed settings, Linux)"},
			{"/etc/claude-code/managed-mcp.json", ccDocsMCP + " (managed MCP servers)"},
		},
		Guarded: []GuardedFile{{
			Path:        "~/.claude.json",
			Keys:        []string{"mcpServers"},
			ProjectKeys: []string{"mcpServers", "enabledMcpjsonServers", "enableAllProjectMcpServers", "allowedTools"},
			Cite:        ccDocsMCP + " (user and local scopes live in ~/.claude.json)",
		}},
	}
}

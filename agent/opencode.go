package agent

// OpenCode, npm opencode-ai (a native binary). Sources: opencode.ai/docs
// (config, providers, troubleshooting) and github:sst/opencode
// packages/opencode/src/global/index.ts (XDG data, state, cache and config
// directories).
const (
	ocDocsConfig    = "https://opencode.ai/docs/config"
	ocDocsProviders = "https://opencode.ai/docs/providers"
	ocGlobal        = "github:sst/opencode packages/opencode/src/global/index.ts"
	ocDocsEnv       = "https://opencode.ai/docs/cli (environment variables)"
	ocObserved      = "observed: opencode 1.18.33 writes it at start-up"
)

func openCode() *Profile {
	return &Profile{
		Name:     "opencode",
		Title:    "OpenCode",
		Commands: []string{"opencode"},
		Packages: []string{"opencode-ai"},
		Checked:  []string{"1.18.33"},
		Hosts: []Entry{
			{"api.anthropic.com:443", ocDocsProviders + " (Anthropic)"},
			{"api.openai.com:443", ocDocsProviders + " (OpenAI)"},
			{"auth.openai.com:443", ocDocsProviders + " (ChatGPT sign-in)"},
			{"platform.claude.com:443", ocDocsProviders + " (Claude sign-in)"},
		},
		// The AI SDK providers OpenCode uses read their base URL (with
		// its /v1) from these variables.
		Endpoints: func(in Inputs) []Entry {
			var out []Entry
			if u := in.Env("ANTHROPIC_BASE_URL"); u != "" {
				out = append(out, Entry{u, ocDocsProviders + " (ANTHROPIC_BASE_URL)"})
			}
			if u := in.Env("OPENAI_BASE_URL"); u != "" {
				out = append(out, Entry{u, ocDocsProviders + " (OPENAI_BASE_URL)"})
			}
			return out
		},
		Credentials: []Entry{
			{"ANTHROPIC_API_KEY", ocDocsProviders},
			{"OPENAI_API_KEY", ocDocsProviders},
			{"OPENROUTER_API_KEY", ocDocsProviders},
			{"GEMINI_API_KEY", ocDocsProviders},
		},
		Env: []Entry{
			// No self-update, no session sharing, no language-server
			// downloads. OPENCODE_DISABLE_MODELS_FETCH is NOT set: with it
			// 1.18.33 fails every request ("fetch() URL is invalid");
			// without it the catalogue fetch (models.opencode.ai) is
			// refused by the network rules and the bundled one is used.
			{"OPENCODE_DISABLE_AUTOUPDATE=1", ocDocsEnv},
			{"OPENCODE_DISABLE_SHARE=1", ocDocsEnv},
			{"OPENCODE_DISABLE_LSP_DOWNLOAD=1", ocDocsEnv},
		},
		State: []Entry{
			// Rewritten at every start (observed: 1.18.33). Being a
			// writable file, it keeps its directory writable at the mount
			// level (landlock/roview_linux.go), so the rest of the config
			// directory is refused by Landlock (EACCES, audited), which
			// OpenCode tolerates; the read-only view's EROFS makes it exit
			// ("Unexpected error ... FileSystem.writeFile").
			{"~/.config/opencode/.gitignore", ocObserved},
			{"~/.local/share/opencode", ocGlobal + " (Global.Path.data: sessions, auth.json, logs)"},
			{"~/.local/state/opencode", ocGlobal + " (Global.Path.state)"},
			{"~/.cache/opencode", ocGlobal + " (Global.Path.cache)"},
		},
		StateFiles: map[string]string{
			// What OpenCode writes there itself.
			"~/.config/opencode/.gitignore": "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore",
		},
		Rules: []Entry{
			{"~/.config/opencode/opencode.json", ocDocsConfig},
			{"~/.config/opencode/opencode.jsonc", ocDocsConfig},
			{"~/.config/opencode/plugins", "https://opencode.ai/docs/plugins"},
			{"~/.config/opencode/plugin", "https://opencode.ai/docs/plugins"},
			{"~/.config/opencode/agent", "https://opencode.ai/docs/agents"},
			{"~/.config/opencode/command", "https://opencode.ai/docs/commands"},
			{"~/.config/opencode/AGENTS.md", "https://opencode.ai/docs/rules"},
			// In the project too (names, protected at any depth).
			{"opencode.json", ocDocsConfig},
			{"opencode.jsonc", ocDocsConfig},
			{".opencode", ocDocsConfig + " (.opencode/ plugins, agents, commands)"},
		},
	}
}

package agent

import (
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// Codex CLI, npm @openai/codex (a Node launcher for the native
// codex-rs binary). Sources: github.com/openai/codex docs/config.md,
// docs/authentication.md, codex-rs/core/src/model_provider_info.rs,
// codex-rs/login, and the shipped binary's behaviour under strace.
const (
	cxConfig    = "github:openai/codex docs/config.md"
	cxAuth      = "github:openai/codex docs/authentication.md"
	cxProviders = "github:openai/codex codex-rs/core/src/model_provider_info.rs"
	cxSandbox   = "github:openai/codex docs/sandbox.md (sandbox_mode)"
	cxObserved  = "observed: codex 0.171.0 under strace"
)

func codex() *Profile {
	return &Profile{
		Name:     "codex",
		Title:    "Codex CLI",
		Commands: []string{"codex"},
		Packages: []string{"@openai/codex"},
		Checked:  []string{"0.171.0"},
		Hosts: []Entry{
			// ChatGPT sign-in: token exchange and refresh.
			{"auth.openai.com:443", cxAuth + " (issuer https://auth.openai.com)"},
		},
		Endpoints: codexEndpoints,
		Credentials: []Entry{
			{"OPENAI_API_KEY", cxAuth},
			{"CODEX_API_KEY", cxAuth + " (codex exec)"},
		},
		Args: []Entry{
			// Codex's own sandbox (bubblewrap / Landlock helper) cannot
			// start inside a session; the session is the sandbox.
			{"-c", cxSandbox},
			{`sandbox_mode="danger-full-access"`, cxSandbox},
			// No update check against GitHub releases.
			{"-c", cxConfig + " (check_for_update_on_startup)"},
			{"check_for_update_on_startup=false", cxConfig + " (check_for_update_on_startup)"},
		},
		State: []Entry{
			// Codex keeps SQLite databases (state, logs, history) directly
			// in CODEX_HOME, with -wal/-journal files beside them, so the
			// directory itself is writable; its rule files are protected
			// inside it (Rules). skills/ stays writable: Codex installs its
			// own skills/.system there at every start.
			{"~/.codex", cxObserved + " (state_*.sqlite, sessions/, history.jsonl, log/, auth.json)"},
		},
		Rules: []Entry{
			{"~/.codex/config.toml", cxConfig},
			{"~/.codex/hooks.json", "github:openai/codex docs/hooks.md"},
			{"~/.codex/rules", "https://developers.openai.com/codex/rules (~/.codex/rules/*.rules, codex execpolicy)"},
			{"~/.codex/agents", cxConfig + " (agent definitions)"},
			{"~/.codex/AGENTS.md", "github:openai/codex docs/agents_md.md"},
			{"~/.codex/AGENTS.override.md", "github:openai/codex docs/agents_md.md"},
			{"~/.codex/prompts", "github:openai/codex docs/prompts.md"},
			{"~/.codex/plugins", cxConfig + " (plugins)"},
			{"/etc/codex/managed_config.toml", cxConfig + " (managed configuration)"},
			{"/etc/codex/requirements.toml", cxConfig + " (requirements)"},
		},
	}
}

// codexEndpoints follows Codex's provider settings: the built-in OpenAI
// provider (api.openai.com, or chatgpt.com's backend when signed in with
// ChatGPT), OPENAI_BASE_URL, and every model_providers.NAME.base_url given
// with -c on the command line or in ~/.codex/config.toml.
func codexEndpoints(in Inputs) []Entry {
	var out []Entry
	custom := false
	argv := in.Argv
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		var kv string
		switch {
		case (a == "-c" || a == "--config") && i+1 < len(argv):
			kv = argv[i+1]
			i++
		case strings.HasPrefix(a, "--config="):
			kv = strings.TrimPrefix(a, "--config=")
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			kv = a[2:]
		default:
			continue
		}
		key, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		key = strings.TrimSpace(key)
		if strings.HasPrefix(key, "model_providers.") && strings.HasSuffix(key, ".base_url") {
			out = append(out, Entry{unquoteTOML(val), cxProviders + " (-c " + key + ")"})
			if key != "model_providers.openai.base_url" {
				custom = true
			}
		}
	}
	if in.ReadFile != nil && in.Home != "" {
		if b, err := in.ReadFile(Expand("~/.codex/config.toml", in.Home)); err == nil {
			var cfg struct {
				ModelProviders map[string]struct {
					BaseURL string `toml:"base_url"`
				} `toml:"model_providers"`
			}
			if err := toml.Unmarshal(b, &cfg); err == nil {
				for name, p := range cfg.ModelProviders {
					if p.BaseURL != "" {
						out = append(out, Entry{p.BaseURL, cxProviders + " (~/.codex/config.toml model_providers." + name + ".base_url)"})
					}
				}
			}
		}
	}
	if u := in.Env("OPENAI_BASE_URL"); u != "" {
		out = append(out, Entry{u, cxProviders + " (OPENAI_BASE_URL)"})
	} else if !custom {
		out = append(out,
			Entry{"https://api.openai.com", cxProviders + " (https://api.openai.com/v1)"},
			Entry{"https://chatgpt.com", cxProviders + " (ChatGPT sign-in: https://chatgpt.com/backend-api/codex)"})
	}
	return out
}

// unquoteTOML reads a -c value the way Codex does: TOML when it parses,
// the raw string otherwise.
func unquoteTOML(v string) string {
	var doc struct{ V string }
	if err := toml.Unmarshal([]byte("V = "+v), &doc); err == nil {
		return doc.V
	}
	return strings.TrimSpace(v)
}

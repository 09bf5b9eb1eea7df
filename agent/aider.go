package agent

// Aider, PyPI aider-chat (also aider-install). Sources: aider.chat/docs
// (config/options, config/dotenv, more/analytics, llms) and
// github:Aider-AI/aider aider/args.py.
const (
	adOptions   = "https://aider.chat/docs/config/options.html"
	adAnalytics = "https://aider.chat/docs/more/analytics.html"
	adLLMs      = "https://aider.chat/docs/llms.html"
	adArgs      = "github:Aider-AI/aider aider/args.py"
)

func aider() *Profile {
	return &Profile{
		Name:     "aider",
		Title:    "Aider",
		Commands: []string{"aider"},
		Packages: []string{"aider-chat"},
		// Taken from Aider's documentation and source only: aider-chat is
		// not installed or run by the tests.
		Checked: nil,
		Hosts: []Entry{
			{"api.anthropic.com:443", adLLMs + " (Anthropic)"},
			{"api.openai.com:443", adLLMs + " (OpenAI)"},
		},
		Endpoints: func(in Inputs) []Entry {
			var out []Entry
			for _, v := range []string{"OPENAI_API_BASE", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_BASE"} {
				if u := in.Env(v); u != "" {
					out = append(out, Entry{u, adOptions + " (" + v + ")"})
				}
			}
			return out
		},
		Credentials: []Entry{
			{"ANTHROPIC_API_KEY", adLLMs},
			{"OPENAI_API_KEY", adLLMs},
			{"OPENROUTER_API_KEY", adLLMs},
			{"GEMINI_API_KEY", adLLMs},
			{"DEEPSEEK_API_KEY", adLLMs},
		},
		Env: []Entry{
			{"AIDER_ANALYTICS=false", adAnalytics + " (--no-analytics)"},
			{"AIDER_CHECK_UPDATE=false", adOptions + " (--no-check-update)"},
			{"AIDER_SHOW_RELEASE_NOTES=false", adOptions},
		},
		State: []Entry{
			// Caches, analytics id, installs; the chat history and tag
			// cache (.aider.*) live in the repository, which is the
			// workspace and writable already.
			{"~/.aider", adArgs + " (~/.aider/caches, analytics.json)"},
		},
		Rules: []Entry{
			{"~/.aider.conf.yml", "https://aider.chat/docs/config/aider_conf.html"},
			{"~/.aider.model.settings.yml", "https://aider.chat/docs/config/adv-model-settings.html"},
			{"~/.aider.model.metadata.json", "https://aider.chat/docs/config/adv-model-settings.html"},
			// In the repository too (a name, protected at any depth).
			{".aider.conf.yml", "https://aider.chat/docs/config/aider_conf.html"},
		},
	}
}

package policy

import (
	"runtime"
	"slices"
)

// The built-in sets every policy gets, whatever its layers say: protected
// names, credential locations, scrubbed environment names and, for
// restricted reads, the platform's system directories.

// gitVectors are the entries of a git directory that let whoever writes
// them run code (hooks, config's core.fsmonitor/core.hooksPath, alternate
// common dirs, info/ attributes and excludes filters).
var gitVectors = []string{"hooks", "config", "config.worktree", "commondir", "info"}

// defaultProtectedNames are protected at any depth below a writable root.
var defaultProtectedNames = []string{
	".openoxide", ".codex", ".agents", ".claude", ".cursor", ".vscode", ".idea",
	".mcp.json", ".envrc", ".gitmodules", "AGENTS.md", "CLAUDE.md", "CONTEXT.md",
}

// defaultProtectedPatterns returns DESIGN §2's protected set.
func defaultProtectedPatterns(protectGit string) []ProtectedPattern {
	var out []ProtectedPattern
	if protectGit == "all" {
		out = append(out, ProtectedPattern{Components: []string{".git"}, Type: EntryAny, Source: "default (protect_git = \"all\")"})
	} else {
		// A .git *file* points git at another directory (gitdir:); it must
		// not be rewritten, while a .git directory may be created (git init).
		// git worktree add and submodules create one: allowed, and checked
		// when the session ends (CheckedAtEnd).
		out = append(out, ProtectedPattern{Components: []string{".git"}, Type: EntryFile, Source: "default", CheckedAtEnd: true})
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
				c := append(slices.Clone(p), v)
				if slices.Equal(c, []string{".git", "worktrees", "*", "commondir"}) {
					// git worktree add writes it: a file may be created
					// and is checked at the session's end; a directory of
					// that name is never git's.
					out = append(out, ProtectedPattern{Components: c, Type: EntryFile, Source: "default", CheckedAtEnd: true},
						ProtectedPattern{Components: slices.Clone(c), Type: EntryDir, Source: "default"})
					continue
				}
				out = append(out, ProtectedPattern{Components: c, Type: EntryAny, Source: "default"})
			}
		}
	}
	for _, n := range defaultProtectedNames {
		out = append(out, ProtectedPattern{Components: []string{n}, Type: EntryAny, Source: "default"})
	}
	return out
}

// defaultDenyRead are credential locations below the home directory.
func defaultDenyRead() []string {
	list := []string{
		".ssh", ".aws", ".config/gcloud", ".azure", ".kube", ".docker/config.json",
		".npmrc", ".pypirc", ".netrc", ".gnupg", ".git-credentials", ".config/gh",
	}
	switch runtime.GOOS {
	case "darwin":
		list = append(list,
			"Library/Keychains",
			"Library/Application Support/Google/Chrome",
			"Library/Application Support/Chromium",
			"Library/Application Support/BraveSoftware",
			"Library/Application Support/Microsoft Edge",
			"Library/Application Support/Firefox",
			"Library/Safari",
			"Library/Cookies",
		)
	case "windows":
		list = append(list,
			"AppData/Local/Google/Chrome/User Data",
			"AppData/Local/Microsoft/Edge/User Data",
			"AppData/Local/BraveSoftware",
			"AppData/Roaming/Mozilla/Firefox",
		)
	default:
		list = append(list,
			".mozilla", ".config/google-chrome", ".config/chromium",
			".config/BraveSoftware", ".config/microsoft-edge", ".config/vivaldi",
			".config/opera", "snap/firefox", "snap/chromium",
		)
	}
	return list
}

// defaultScrub are environment names removed before `run` execs.
var defaultScrub = []string{
	"*_TOKEN", "*_SECRET", "*_SECRET_KEY", "*_SECRET_ACCESS_KEY", "*_PASSWORD", "*_PASSWD",
	"*_API_KEY", "*_APIKEY", "*_ACCESS_KEY", "*_PRIVATE_KEY", "*_CREDENTIALS", "*_AUTH",
	"AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "GPG_AGENT_INFO",
	"VAULT_TOKEN", "NETRC", "DOCKER_AUTH_CONFIG",
}

// platformReadable are readable in restricted read mode on every run.
func platformReadable() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{"/usr", "/bin", "/sbin", "/System", "/Library", "/opt/homebrew", "/private/etc", "/private/var/db/timezone", "/dev"}
	case "windows":
		return nil
	}
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store", "/proc", "/sys", "/dev", "/run"}
}

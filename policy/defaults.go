package policy

import (
	"runtime"
)

// The built-in sets every policy gets, whatever its layers say: credential
// locations, scrubbed environment names and, for restricted reads, the
// platform's system directories. The protected set is protectedset.go's.

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

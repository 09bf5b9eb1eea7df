package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultPath is the search path when the command's environment has no
// PATH (or an empty one).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// LookPath finds the executable file names in the PATH of env (the
// environment the command will get, not the supervisor's), as `run` and the
// daemon's unsandboxed exec both resolve argv[0]. A name holding a slash is
// returned as it is. Empty and relative PATH entries are skipped: the
// supervisor is privileged and they would resolve against its own working
// directory (os/exec refuses them for the same reason, exec.ErrDot).
func LookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	if pathEnv == "" {
		pathEnv = DefaultPath
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found in PATH", file)
}

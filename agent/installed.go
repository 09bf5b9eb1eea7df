package agent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Installed is an agent found on the machine.
type Installed struct {
	Profile string `json:"profile"`
	Command string `json:"command"`
	// Path is where the command resolves to (symlinks followed).
	Path string `json:"path"`
	// Version is read from the package the command belongs to
	// (package.json of its npm package), never by running it: doctor
	// runs as root. Empty when it could not be found.
	Version string `json:"version,omitempty"`
	// Checked is true when the profile was checked against Version.
	Checked bool `json:"checked"`
	// CheckedVersions are the versions the profile was checked against.
	CheckedVersions []string `json:"checked_versions"`
	Note            string   `json:"note,omitempty"`
}

// Find looks every profile's commands up in path (a PATH value).
func Find(path string) []Installed {
	var out []Installed
	for _, p := range All() {
		for _, c := range p.Commands {
			exe, err := lookIn(path, c)
			if err != nil {
				continue
			}
			in := Installed{Profile: p.Name, Command: c, Path: exe, CheckedVersions: p.Checked}
			if v, ok := npmVersion(exe, p.Packages); ok {
				in.Version = v
				in.Checked = slices.Contains(p.Checked, v)
				switch {
				case len(p.Checked) == 0:
					in.Note = "the profile was taken from the documentation, not checked against a running version"
				case !in.Checked:
					in.Note = "the profile was checked against " + strings.Join(p.Checked, ", ") + "; review `oxsupervise agents` against this version's documentation"
				}
			} else {
				in.Note = "version unknown (not an npm package install)"
			}
			out = append(out, in)
		}
	}
	return out
}

func lookIn(path, name string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return filepath.EvalSymlinks(p)
		}
	}
	return "", exec.ErrNotFound
}

// npmVersion finds the package.json of the npm package exe lies in.
func npmVersion(exe string, packages []string) (string, bool) {
	for dir := filepath.Dir(exe); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			continue
		}
		var pkg struct{ Name, Version string }
		if json.Unmarshal(b, &pkg) == nil && slices.Contains(packages, pkg.Name) {
			return pkg.Version, true
		}
		return "", false
	}
	return "", false
}

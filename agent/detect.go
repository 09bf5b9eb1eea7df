package agent

import (
	"path/filepath"
	"slices"
	"strings"
)

// None is the --agent value that turns profiles off.
const None = "none"

// Detect returns the profile the command line argv runs, or nil, and
// where in argv the agent's own arguments start (the profile's Args go
// there). It recognises, in this order:
//
//   - the command's own name (claude, codex, opencode, aider), whatever
//     directory it is in;
//   - `npx [-y|--yes] PKG[@VERSION] ...` (also pnpx, bunx) naming the
//     agent's package;
//   - `node [NODE-OPTIONS] FILE ...` where FILE lies inside the agent's
//     package directory (node_modules/PKG/...).
//
// Wrappers (env, sh -c, sudo) are not looked through: name the profile
// with --agent there.
func Detect(argv []string) (*Profile, int) {
	if len(argv) == 0 {
		return nil, 0
	}
	cmd := filepath.Base(argv[0])
	for _, p := range All() {
		if slices.Contains(p.Commands, cmd) {
			return p, 1
		}
	}
	var find func(string) *Profile
	switch cmd {
	case "npx", "pnpx", "bunx":
		find = func(a string) *Profile { return byPackage(packageName(a)) }
	case "node", "nodejs", "bun":
		find = byPackageDir
	default:
		return nil, 0
	}
	for i, a := range argv[1:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if p := find(a); p != nil {
			return p, i + 2
		}
		break
	}
	return nil, 0
}

// packageName strips a version from "@scope/name@1.2.3" or "name@1".
func packageName(spec string) string {
	at := strings.LastIndexByte(spec, '@')
	if at > 0 {
		return spec[:at]
	}
	return spec
}

func byPackage(name string) *Profile {
	for _, p := range All() {
		if slices.Contains(p.Packages, name) {
			return p
		}
	}
	return nil
}

func byPackageDir(file string) *Profile {
	file = filepath.ToSlash(file)
	for _, p := range All() {
		for _, pkg := range p.Packages {
			if strings.Contains(file, "node_modules/"+pkg+"/") {
				return p
			}
		}
	}
	return nil
}

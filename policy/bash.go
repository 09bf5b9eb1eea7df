package policy

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// maxShellNesting bounds how deep `bash -c '...'` and `eval` strings are
// re-parsed, so hostile input cannot recurse without end.
const maxShellNesting = 4

// SplitBash splits a shell command line into the simple commands it would
// run: each side of pipelines, &&, ||, ;, the bodies of subshells, command
// substitutions ($(...) and backticks), process substitutions, functions,
// and the strings given to `sh -c` / `bash -c` / `eval`. Wrappers such as
// sudo, env, timeout or xargs contribute both the full command and the
// command they wrap. Each command comes back as its words joined by single
// spaces, with quotes removed; expansions keep their source text ($HOME).
func SplitBash(src string) (cmds []string, err error) {
	defer func() {
		// The parser is third-party code fed untrusted input: a panic
		// becomes an error (the caller then asks), never a crash.
		if r := recover(); r != nil {
			cmds, err = nil, fmt.Errorf("shell parser failed: %v", r)
		}
	}()
	var out [][]string
	if err := splitInto(src, 0, &out); err != nil {
		return nil, err
	}
	for _, words := range out {
		cmds = append(cmds, strings.Join(words, " "))
	}
	return cmds, nil
}

// SplitBashWords is SplitBash keeping each command's words apart.
func SplitBashWords(src string) (cmds [][]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			cmds, err = nil, fmt.Errorf("shell parser failed: %v", r)
		}
	}()
	err = splitInto(src, 0, &cmds)
	return cmds, err
}

func splitInto(src string, depth int, out *[][]string) error {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return fmt.Errorf("parse shell command: %w", err)
	}
	var walkErr error
	syntax.Walk(f, func(n syntax.Node) bool {
		if walkErr != nil {
			return false
		}
		switch x := n.(type) {
		case *syntax.CallExpr:
			if len(x.Args) == 0 {
				return true // assignments only; their values are walked
			}
			words := make([]string, 0, len(x.Args))
			for _, w := range x.Args {
				words = append(words, renderWord(w))
			}
			walkErr = addCommand(words, depth, out)
		case *syntax.DeclClause:
			words := []string{x.Variant.Value}
			for _, a := range x.Args {
				words = append(words, renderNode(a))
			}
			*out = append(*out, words)
		}
		return true
	})
	return walkErr
}

// addCommand records words and, for wrappers and nested shells, the
// commands they run.
func addCommand(words []string, depth int, out *[][]string) error {
	*out = append(*out, words)
	if depth >= maxShellNesting || len(words) == 0 {
		return nil
	}
	name := path.Base(words[0])
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox":
		args := words[1:]
		if name == "busybox" && len(args) > 0 && (args[0] == "sh" || args[0] == "ash") {
			args = args[1:]
		}
		for i, a := range args {
			if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c") && i+1 < len(args) {
				return splitInto(args[i+1], depth+1, out)
			}
		}
	case "eval":
		return splitInto(strings.Join(words[1:], " "), depth+1, out)
	}
	if inner := unwrap(words); len(inner) > 0 {
		return addCommand(inner, depth+1, out)
	}
	return nil
}

// unwrap returns the command a wrapper runs, or nil.
func unwrap(words []string) []string {
	name := path.Base(words[0])
	rest := words[1:]
	skipOpts := func(withArg map[string]bool) []string {
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			opt := rest[0]
			rest = rest[1:]
			if opt == "--" {
				break
			}
			if withArg[opt] && len(rest) > 0 {
				rest = rest[1:]
			}
		}
		return rest
	}
	switch name {
	case "sudo", "doas":
		return skipOpts(map[string]bool{"-u": true, "-g": true, "-C": true, "-h": true, "-p": true, "-r": true, "-t": true, "-U": true, "-D": true})
	case "env":
		rest = skipOpts(map[string]bool{"-u": true, "-C": true, "-S": true, "--unset": true, "--chdir": true})
		for len(rest) > 0 && strings.Contains(rest[0], "=") {
			rest = rest[1:]
		}
		return rest
	case "nohup", "command", "exec", "builtin", "time", "setsid", "unbuffer":
		return skipOpts(nil)
	case "nice", "ionice", "chrt", "taskset", "stdbuf":
		return skipOpts(map[string]bool{"-n": true, "-c": true, "-p": true})
	case "timeout":
		rest = skipOpts(map[string]bool{"-s": true, "-k": true, "--signal": true, "--kill-after": true})
		if len(rest) > 0 {
			return rest[1:] // the duration
		}
	case "xargs":
		return skipOpts(map[string]bool{"-I": true, "-n": true, "-P": true, "-L": true, "-d": true, "-E": true, "-s": true, "-a": true})
	case "watch":
		return skipOpts(map[string]bool{"-n": true, "-d": false})
	}
	return nil
}

// renderWord removes quotes from literal parts and keeps the source text of
// expansions, so `"r"m -rf` judges as `rm -rf` and `$X` stays visible.
func renderWord(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		renderPart(&b, p, false)
	}
	return b.String()
}

func renderPart(b *strings.Builder, p syntax.WordPart, quoted bool) {
	switch x := p.(type) {
	case *syntax.Lit:
		b.WriteString(unescape(x.Value, quoted))
	case *syntax.SglQuoted:
		b.WriteString(x.Value)
	case *syntax.DblQuoted:
		for _, q := range x.Parts {
			renderPart(b, q, true)
		}
	default:
		b.WriteString(renderNode(p))
	}
}

func renderNode(n syntax.Node) string {
	var b strings.Builder
	if err := syntax.NewPrinter(syntax.Minify(true)).Print(&b, n); err != nil {
		return "?"
	}
	return b.String()
}

// unescape drops the backslashes the shell would remove.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			next := s[i+1]
			if next == '\n' {
				i++
				continue
			}
			if !quoted || strings.IndexByte("$`\"\\", next) >= 0 {
				b.WriteByte(next)
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// subcommandTools are commands whose second word selects what they do, so
// an "always" approval covers `git commit *`, not every `git`.
var subcommandTools = map[string]bool{
	"git": true, "npm": true, "pnpm": true, "yarn": true, "bun": true, "deno": true, "cargo": true,
	"go": true, "docker": true, "podman": true, "kubectl": true, "helm": true, "gh": true,
	"pip": true, "pip3": true, "uv": true, "poetry": true, "apt": true, "apt-get": true, "brew": true,
	"systemctl": true, "terraform": true, "dotnet": true, "mvn": true, "gradle": true, "make": true,
	"npx": true, "rustup": true, "conda": true, "composer": true, "bundle": true, "rake": true,
}

// PrefixPattern derives the pattern an "always" approval of one simple
// command stores: `git commit -m x` → `git commit *`, `ls -la` → `ls *`.
func PrefixPattern(words []string) string {
	if len(words) == 0 {
		return ""
	}
	head := []string{escapePattern(words[0])}
	if subcommandTools[path.Base(words[0])] && len(words) > 1 && isSubcommandWord(words[1]) {
		head = append(head, escapePattern(words[1]))
	}
	return strings.Join(head, " ") + " *"
}

func isSubcommandWord(s string) bool {
	if s == "" || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':') {
			return false
		}
	}
	return true
}

func escapePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`)
	return r.Replace(s)
}

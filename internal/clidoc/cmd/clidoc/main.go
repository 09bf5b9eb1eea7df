// Command clidoc writes the man pages and shell completions of a built
// oxsupervise binary from its --help output (package clidoc):
//
//	clidoc --bin bin/oxsupervise --version 1.2.3 --date 2026-12-01 --out DIR
//
// writes DIR/man/man1/*.1, DIR/bash/oxsupervise, DIR/zsh/_oxsupervise and
// DIR/fish/oxsupervise.fish.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/internal/clidoc"
)

func main() {
	bin := pflag.String("bin", "bin/oxsupervise", "the built binary whose --help is documented")
	prog := pflag.String("name", "oxsupervise", "the program's name")
	version := pflag.String("version", "dev", "version for the page footers")
	date := pflag.String("date", "", "date for the page footers (YYYY-MM-DD; required, for reproducible output)")
	out := pflag.String("out", "", "output directory (required)")
	pflag.Parse()
	if *out == "" || *date == "" || pflag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: clidoc --bin BIN --version V --date YYYY-MM-DD --out DIR")
		os.Exit(2)
	}
	if err := run(*bin, *prog, *version, *date, *out); err != nil {
		fmt.Fprintf(os.Stderr, "clidoc: %v\n", err)
		os.Exit(1)
	}
}

func run(bin, prog, version, date, out string) error {
	cli, err := clidoc.Read(context.Background(), bin, prog)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		filepath.Join("bash", prog):         cli.Bash(),
		filepath.Join("zsh", "_"+prog):      cli.Zsh(),
		filepath.Join("fish", prog+".fish"): cli.Fish(),
	}
	for name, page := range cli.ManPages(version, date) {
		files[filepath.Join("man", "man1", name)] = page
	}
	for name, data := range files {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

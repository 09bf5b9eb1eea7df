//go:build linux

package work

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteTree writes a tar of files small source-like files in 100-file
// directories.
func WriteTree(path string, files int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	now := time.Now()
	for d := 0; d*100 < files; d++ {
		dir := fmt.Sprintf("src/m%02d/p%03d/", d%20, d)
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}); err != nil {
			return err
		}
		for i := 0; i < 100 && d*100+i < files; i++ {
			body := []byte(fmt.Sprintf("// file %d/%d\npackage p%03d\n\nfunc F%d() int { return %d }\n%s", d, i, d, i, d*100+i, strings.Repeat("// padding line\n", i%16)))
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%sf%03d.go", dir, i), Mode: 0o644, Size: int64(len(body)), ModTime: now}); err != nil {
				return err
			}
			if _, err := tw.Write(body); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// WriteModule writes a module of pkgs packages that import each other in
// a chain and a few standard packages.
func WriteModule(dir string, pkgs int) error {
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/benchmod\n\ngo 1.22\n"), 0o644); err != nil {
		return err
	}
	for i := 0; i < pkgs; i++ {
		p := filepath.Join(dir, fmt.Sprintf("p%02d", i))
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		imp := ""
		call := "0"
		if i > 0 {
			imp = fmt.Sprintf("\t\"example.com/benchmod/p%02d\"\n", i-1)
			call = fmt.Sprintf("p%02d.Sum(n)", i-1)
		}
		for j := 0; j < 5; j++ {
			src := fmt.Sprintf("package p%02d\n\nimport (\n\t\"fmt\"\n\t\"sort\"\n\t\"strings\"\n%s)\n\n", i, map[bool]string{true: imp, false: ""}[j == 0])
			if j == 0 {
				src += fmt.Sprintf("func Sum(n int) int { return n + %s }\n\n", call)
			}
			src += fmt.Sprintf("func Format%d(xs []string) string {\n\tsort.Strings(xs)\n\treturn fmt.Sprintf(\"%%d:%%s\", len(xs), strings.Join(xs, \",\"))\n}\n", j)
			if err := os.WriteFile(filepath.Join(p, fmt.Sprintf("f%d.go", j)), []byte(src), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// GoEnv is the environment of the macro's go build with cache gocache and
// temporary files in tmp. The host harness and the VM benchmark build with
// the same one, so a cache filled by one hits in the other; -trimpath
// keeps the module's directory out of the cache keys, so the module may be
// copied elsewhere.
func GoEnv(gocache, tmp string) []string {
	return []string{"GOCACHE=" + gocache, "GOPATH=" + filepath.Join(filepath.Dir(gocache), "gopath"), "GOFLAGS=-mod=mod -trimpath",
		"GOTOOLCHAIN=local", "GOPROXY=off", "GOTMPDIR=" + tmp, "GOTELEMETRY=off", "GOENV=off"}
}

package testutil

import (
	"archive/tar"
	"bytes"
	"os"
	"testing"
	"time"
)

// WriteTar writes an uncompressed tar archive of files (name -> content)
// to path, for tests that unpack archives inside a session.
func WriteTar(tb testing.TB, path string, files map[string]string) {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1, 0)}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

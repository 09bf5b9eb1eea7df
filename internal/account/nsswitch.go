package account

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
)

// nsswitchConf is glibc's name service configuration.
const nsswitchConf = "/etc/nsswitch.conf"

// filesOnlyGroups reports whether the machine's group database is
// /etc/group alone, so that os/user's answer without cgo (which reads
// /etc/group) is the whole one. Without the file glibc uses files; an
// unreadable one counts as more than files (NSS is then asked).
func filesOnlyGroups() bool {
	f, err := os.Open(nsswitchConf)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	defer f.Close()
	sources, err := nssSources(f, "group")
	if err != nil {
		return false
	}
	return sources == nil || len(sources) == 1 && sources[0] == "files"
}

// nssSources are the services nsswitch.conf r names for db, without the
// [STATUS=ACTION] items; nil when db has no line (glibc's default then).
// Several lines for db give the services of all (whichever glibc heeds,
// a source on any of them is one NSS may ask).
func nssSources(r io.Reader, db string) ([]string, error) {
	var sources []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != db {
			continue
		}
		if sources == nil {
			sources = []string{}
		}
		depth := 0
		for _, tok := range strings.FieldsFunc(rest, func(r rune) bool { return r == ' ' || r == '\t' }) {
			for tok != "" {
				switch {
				case tok[0] == '[':
					depth++
					tok = tok[1:]
				case depth > 0:
					i := strings.IndexByte(tok, ']')
					if i < 0 {
						tok = ""
						continue
					}
					depth--
					tok = tok[i+1:]
				default:
					i := strings.IndexByte(tok, '[')
					if i < 0 {
						sources = append(sources, tok)
						tok = ""
						continue
					}
					if i > 0 {
						sources = append(sources, tok[:i])
					}
					tok = tok[i:]
				}
			}
		}
	}
	return sources, sc.Err()
}

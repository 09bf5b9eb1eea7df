// Package mountinfo parses /proc/PID/mountinfo (proc(5)): the one place
// that knows its format and the kernel's octal escaping of paths.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of mountinfo.
type Mount struct {
	ID, Parent   int
	Major, Minor uint32
	// Root is the path inside the filesystem that is mounted (not "/"
	// for bind mounts of a subdirectory); Point is where it is mounted.
	Root, Point string
	Options     string // per-mount options (rw, nosuid, ...)
	FSType      string
	Source      string
	SuperOpts   string // per-superblock options
}

// Read parses the calling process's mountinfo.
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads mountinfo content. A malformed line is an error naming it.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" {
			continue
		}
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(text, " - ")
		if !ok {
			return nil, fmt.Errorf("mountinfo line %d: no ' - ' separator: %q", line, text)
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 6 || len(tail) < 2 {
			return nil, fmt.Errorf("mountinfo line %d: too few fields: %q", line, text)
		}
		m := Mount{Root: Unescape(fields[3]), Point: Unescape(fields[4]), Options: fields[5], FSType: tail[0], Source: Unescape(tail[1])}
		if len(tail) > 2 {
			m.SuperOpts = tail[2]
		}
		var err error
		if m.ID, err = strconv.Atoi(fields[0]); err == nil {
			m.Parent, err = strconv.Atoi(fields[1])
		}
		if err == nil {
			maj, min, ok := strings.Cut(fields[2], ":")
			var a, b uint64
			if a, err = strconv.ParseUint(maj, 10, 32); err == nil && ok {
				b, err = strconv.ParseUint(min, 10, 32)
			} else if !ok {
				err = fmt.Errorf("device %q is not MAJOR:MINOR", fields[2])
			}
			m.Major, m.Minor = uint32(a), uint32(b)
		}
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w: %q", line, err, text)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// Unescape undoes the kernel's octal escaping (\040 for a space, \011,
// \012, \134) of paths in mountinfo.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

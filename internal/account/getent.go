package account

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// getentTimeout bounds one NSS question: a module whose server does not
// answer must not hang the command forever (glibc's own lookups would).
const getentTimeout = 30 * time.Second

// errNotFound is getent's exit status 2: NSS has no entry for the key.
var errNotFound = errors.New("no such entry")

// runGetent runs `getent DB KEY` from path (openGetent's ExecPath) and
// returns its output. getent's exit statuses: 0 found, 1 bad arguments or
// unknown database, 2 a key not found, 3 enumeration not supported.
func runGetent(path, db, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, db, key)
	cmd.Args[0] = "getent"
	// Nothing of the caller's environment: NSS needs none, and the
	// output must not be translated.
	cmd.Env = []string{"LC_ALL=C"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("getent %s %s: no answer within %v", db, key, getentTimeout)
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		return nil, errNotFound
	default:
		return nil, fmt.Errorf("getent %s %s: %w: %s", db, key, err, strings.TrimSpace(stderr.String()))
	}
}

// oneLine is out's single newline-terminated line.
func oneLine(out []byte) (string, error) {
	s, ok := strings.CutSuffix(string(out), "\n")
	if !ok || s == "" || strings.ContainsAny(s, "\n\x00") {
		return "", fmt.Errorf("want one line, got %q", out)
	}
	return s, nil
}

// parsePasswd parses getent passwd's answer for one key: one passwd(5)
// line, name:password:uid:gid:gecos:home:shell. Groups are left empty.
func parsePasswd(out []byte) (*User, error) {
	line, err := oneLine(out)
	if err != nil {
		return nil, err
	}
	f := strings.Split(line, ":")
	if len(f) != 7 {
		return nil, fmt.Errorf("passwd entry %q has %d fields, want 7", line, len(f))
	}
	if f[0] == "" {
		return nil, fmt.Errorf("passwd entry %q has no name", line)
	}
	u := &User{Name: f[0], Home: f[5]}
	if u.UID, err = parseID(f[2]); err != nil {
		return nil, fmt.Errorf("passwd entry %q: uid: %w", line, err)
	}
	if u.GID, err = parseID(f[3]); err != nil {
		return nil, fmt.Errorf("passwd entry %q: gid: %w", line, err)
	}
	return u, nil
}

// parseInitgroups parses getent initgroups's answer for name: the name
// (padded to 21 columns), then each group id the user is a member of,
// blank-separated. getent asks getgrouplist(3) with no primary group, so
// the primary group is listed only where the group database names the
// user as a member.
func parseInitgroups(out []byte, name string) ([]int, error) {
	line, err := oneLine(out)
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(line, name)
	if !ok || rest != "" && rest[0] != ' ' {
		return nil, fmt.Errorf("initgroups answer %q is not for %s", line, name)
	}
	var gids []int
	for _, f := range strings.Fields(rest) {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil || strings.Trim(f, "0123456789") != "" {
			return nil, fmt.Errorf("initgroups answer %q: group %q is not a decimal id", line, f)
		}
		gids = append(gids, int(n))
	}
	return gids, nil
}

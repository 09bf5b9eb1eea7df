// Package account owns turning a user spec (a name or a decimal uid) into
// the account a command runs as: uid, primary gid, name, home directory
// and supplementary groups. It is the CLI's only user database lookup
// (--user, sudo's SUDO_UID), and it gives the same answer whether the
// binary is built with cgo or without: os/user answers first (through NSS
// with cgo; from /etc/passwd and /etc/group without), and what it does not
// know, NSS answers through glibc's getent program (getent.go). So a
// static CLI still finds users that only LDAP, SSSD, systemd or another
// NSS module knows, and pays for NSS (one getent run, ~0.5 ms) only when
// the files cannot be the whole answer: a user /etc/passwd lacks, or the
// groups of any user where nsswitch.conf's group database names more
// than files (Debian's default, "files systemd": nss-systemd can add
// memberships from userdb).
package account

import (
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/openoxide/oxsupervise/internal/companion"
)

// User is a resolved account.
type User struct {
	Name string
	UID  int
	GID  int // the primary group, from the user database
	Home string
	// Groups are all the groups the account is a member of, the primary
	// group first (what initgroups(3) would set), each once.
	Groups []int
}

// Lookup resolves spec, a user name or a decimal uid, through the
// machine's own resolver. An unknown user is an error naming spec that
// wraps user.UnknownUserError or user.UnknownUserIdError.
func Lookup(spec string) (*User, error) {
	r, release := systemResolver()
	defer release()
	return r.lookup(spec)
}

// resolver is Lookup's machinery; tests replace its parts to reach the
// NSS path in a cgo build, whose os/user would answer NSS users itself.
type resolver struct {
	byName func(string) (*user.User, error)
	byID   func(string) (*user.User, error)
	// nss asks NSS for one key of a database (getent.go); nil when the
	// machine has no getent, and then os/user's answer is final.
	nss func(db, key string) ([]byte, error)
	// groupsFromFiles reports whether os/user's group answer for a user
	// found in the files is the whole one (nsswitch.go).
	groupsFromFiles func() bool
}

// systemResolver is the machine's resolver; release closes the getent
// it opened.
func systemResolver() (r resolver, release func()) {
	r = resolver{byName: user.Lookup, byID: user.LookupId, groupsFromFiles: filesOnlyGroups}
	getent, err := openGetent()
	if err != nil {
		return r, func() {}
	}
	path := companion.ExecPath(int(getent.File.Fd()))
	r.nss = func(db, key string) ([]byte, error) { return runGetent(path, db, key) }
	return r, func() { getent.Close() }
}

// kind of spec: a uid (all decimal digits, within uid_t) or a name.
func parseSpec(spec string) (uid int, isID bool, err error) {
	if spec == "" {
		return 0, false, errors.New("empty user")
	}
	if strings.Trim(spec, "0123456789") == "" {
		n, err := strconv.ParseUint(spec, 10, 32)
		if err != nil || n == 1<<32-1 {
			return 0, false, fmt.Errorf("user %q: not a valid uid", spec)
		}
		return int(n), true, nil
	}
	// What NSS names may hold varies (user@domain, DOMAIN\user); what
	// they may not: the passwd separator, blanks and control characters,
	// and a leading '-' or '+' (an option to getent, a compat marker).
	if spec[0] == '-' || spec[0] == '+' || strings.ContainsFunc(spec, func(r rune) bool {
		return r == ':' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
	}) {
		return 0, false, fmt.Errorf("user %q: not a valid user name", spec)
	}
	return 0, false, nil
}

func (r resolver) lookup(spec string) (*User, error) {
	uid, isID, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	var u *user.User
	if isID {
		u, err = r.byID(spec)
	} else {
		u, err = r.byName(spec)
	}
	var unknownName user.UnknownUserError
	var unknownID user.UnknownUserIdError
	switch {
	case err == nil:
		return r.fromOSUser(spec, u)
	case (errors.As(err, &unknownName) || errors.As(err, &unknownID)) && r.nss != nil:
		// Not in what os/user reads: ask NSS.
	default:
		return nil, fmt.Errorf("user %q: %w", spec, err)
	}
	out, err := r.nss("passwd", spec)
	if errors.Is(err, errNotFound) {
		if isID {
			return nil, fmt.Errorf("user %q: %w", spec, user.UnknownUserIdError(uid))
		}
		return nil, fmt.Errorf("user %q: %w", spec, user.UnknownUserError(spec))
	}
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", spec, err)
	}
	a, err := parsePasswd(out)
	if err != nil {
		return nil, fmt.Errorf("user %q: NSS answer: %w", spec, err)
	}
	if isID && a.UID != uid || !isID && !strings.EqualFold(a.Name, spec) {
		return nil, fmt.Errorf("user %q: NSS answered for another user (%s, uid %d)", spec, a.Name, a.UID)
	}
	if err := r.nssGroups(a); err != nil {
		return nil, fmt.Errorf("user %q: %w", spec, err)
	}
	return a, nil
}

// fromOSUser converts os/user's answer; its groups are complete when
// os/user went through NSS (cgo) or the machine's group database is the
// files alone, else NSS gives them.
func (r resolver) fromOSUser(spec string, u *user.User) (*User, error) {
	a := &User{Name: u.Username, Home: u.HomeDir}
	var err error
	if a.UID, err = parseID(u.Uid); err != nil {
		return nil, fmt.Errorf("user %q: uid: %w", spec, err)
	}
	if a.GID, err = parseID(u.Gid); err != nil {
		return nil, fmt.Errorf("user %q: gid: %w", spec, err)
	}
	if r.nss != nil && !r.groupsFromFiles() {
		if err := r.nssGroups(a); err != nil {
			return nil, fmt.Errorf("user %q: %w", spec, err)
		}
		return a, nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups of user %s: %w", a.Name, err)
	}
	gids := make([]int, 0, len(ids))
	for _, id := range ids {
		n, err := parseID(id)
		if err != nil {
			return nil, fmt.Errorf("groups of user %s: %w", a.Name, err)
		}
		gids = append(gids, n)
	}
	a.Groups = primaryFirst(a.GID, gids)
	return a, nil
}

// nssGroups sets a.Groups from NSS (getent initgroups), the primary group
// first.
func (r resolver) nssGroups(a *User) error {
	out, err := r.nss("initgroups", a.Name)
	if err != nil {
		return fmt.Errorf("groups of user %s: %w", a.Name, err)
	}
	gids, err := parseInitgroups(out, a.Name)
	if err != nil {
		return fmt.Errorf("groups of user %s: NSS answer: %w", a.Name, err)
	}
	a.Groups = primaryFirst(a.GID, gids)
	return nil
}

// primaryFirst is the groups of an account whose primary group is gid and
// which is a member of gids: gid first, each group once.
func primaryFirst(gid int, gids []int) []int {
	groups := []int{gid}
	for _, g := range gids {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	return groups
}

// parseID parses a uid or gid as the user database holds it.
func parseID(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a decimal id", s)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 32-bit id", s)
	}
	return int(n), nil
}

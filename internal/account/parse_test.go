package account

import (
	"errors"
	"os/user"
	"reflect"
	"strings"
	"testing"
)

func TestParsePasswd(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      *User
		err       string
	}{
		{"ldap user", "alice:*:10001:20001:Alice A,,,:/home/alice:/bin/bash\n",
			&User{Name: "alice", UID: 10001, GID: 20001, Home: "/home/alice"}, ""},
		{"empty gecos and shell", "svc:x:998:998::/var/lib/svc:\n",
			&User{Name: "svc", UID: 998, GID: 998, Home: "/var/lib/svc"}, ""},
		{"domain name", "bob@corp.example:*:70000:70000::/home/bob:/bin/sh\n",
			&User{Name: "bob@corp.example", UID: 70000, GID: 70000, Home: "/home/bob"}, ""},
		{"largest uid", "big:x:4294967294:0::/:/bin/sh\n",
			&User{Name: "big", UID: 4294967294, Home: "/"}, ""},
		{"no output", "", nil, "want one line"},
		{"no newline", "alice:x:1:1::/h:/bin/sh", nil, "want one line"},
		{"two lines", "a:x:1:1::/h:/s\nb:x:2:2::/h:/s\n", nil, "want one line"},
		{"blank line", "\n", nil, "want one line"},
		{"six fields", "alice:x:1:1:/h:/bin/sh\n", nil, "6 fields"},
		{"eight fields", "alice:x:1:1::/h:/bin/sh:x\n", nil, "8 fields"},
		{"no name", ":x:1:1::/h:/bin/sh\n", nil, "no name"},
		{"negative uid", "alice:x:-1:1::/h:/bin/sh\n", nil, "uid"},
		{"signed uid", "alice:x:+1:1::/h:/bin/sh\n", nil, "uid"},
		{"empty uid", "alice:x::1::/h:/bin/sh\n", nil, "uid"},
		{"uid overflow", "alice:x:4294967296:1::/h:/bin/sh\n", nil, "uid"},
		{"hex gid", "alice:x:1:0x10::/h:/bin/sh\n", nil, "gid"},
		{"error text", "getent: unknown database\n", nil, "fields"},
		{"nul", "alice:x:1:1::/h\x00:/bin/sh\n", nil, "want one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := parsePasswd([]byte(tc.out))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parsePasswd(%q) = %+v, %v; want an error with %q", tc.out, u, err, tc.err)
				}
				if u != nil {
					t.Fatalf("parsePasswd(%q) returned a user with its error: %+v", tc.out, u)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(u, tc.want) {
				t.Fatalf("parsePasswd(%q) = %+v, %v; want %+v", tc.out, u, err, tc.want)
			}
		})
	}
}

func TestParseInitgroups(t *testing.T) {
	for _, tc := range []struct {
		name, user, out string
		want            []int
		err             string
	}{
		// getent pads the name to 21 columns ("%-21s"), then " %ld" each.
		{"groups", "alice", "alice                 20001 27 100\n", []int{20001, 27, 100}, ""},
		{"none", "alice", "alice                \n", nil, ""},
		{"long name", "a-very-long-user-name-x", "a-very-long-user-name-x 5\n", []int{5}, ""},
		{"name with a blank", "john smith", "john smith            7\n", []int{7}, ""},
		{"other user", "alice", "bob                   1\n", nil, "not for alice"},
		{"name prefix", "al", "alice                 1\n", nil, "not for al"},
		{"negative", "alice", "alice                 -1\n", nil, "not a decimal id"},
		{"garbage", "alice", "alice                 1 x\n", nil, "not a decimal id"},
		{"overflow", "alice", "alice                 4294967296\n", nil, "not a decimal id"},
		{"empty", "alice", "", nil, "want one line"},
		{"two lines", "alice", "alice  1\nalice  2\n", nil, "want one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseInitgroups([]byte(tc.out), tc.user)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseInitgroups(%q) = %v, %v; want an error with %q", tc.out, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseInitgroups(%q) = %v, %v; want %v", tc.out, got, err, tc.want)
			}
		})
	}
}

func TestNSSSources(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       []string
		filesOnly  bool
	}{
		{"debian", "passwd: files systemd\ngroup:          files systemd\n", []string{"files", "systemd"}, false},
		{"files", "group: files\n", []string{"files"}, true},
		{"no line", "passwd: files\n", nil, true},
		{"comment", "# group: sss\ngroup: files # sss\n", []string{"files"}, true},
		{"actions", "group: files [SUCCESS=merge] sss\n", []string{"files", "sss"}, false},
		{"spaced action", "group: files [ NOTFOUND=return ] ldap\n", []string{"files", "ldap"}, false},
		{"glued action", "group: files[!UNAVAIL=return]ldap\n", []string{"files", "ldap"}, false},
		{"two lines", "group: files\ngroup: winbind\n", []string{"files", "winbind"}, false},
		{"compat", "group: compat\n", []string{"compat"}, false},
		{"gshadow is another database", "gshadow: files sss\ngroup: files\n", []string{"files"}, true},
		{"empty line", "group:\n", []string{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nssSources(strings.NewReader(tc.conf), "group")
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("nssSources(%q) = %#v, %v; want %#v", tc.conf, got, err, tc.want)
			}
			if only := got == nil || len(got) == 1 && got[0] == "files"; only != tc.filesOnly {
				t.Fatalf("files only = %v, want %v", only, tc.filesOnly)
			}
		})
	}
}

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		spec string
		uid  int
		isID bool
		err  string
	}{
		{"0", 0, true, ""},
		{"1000", 1000, true, ""},
		{"4294967294", 4294967294, true, ""},
		{"4294967295", 0, false, "not a valid uid"}, // (uid_t)-1
		{"99999999999", 0, false, "not a valid uid"},
		{"alice", 0, false, ""},
		{"1abc", 0, false, ""}, // a name, as getent and glibc read it
		{"bob@corp.example", 0, false, ""},
		{`CORP\bob`, 0, false, ""},
		{"", 0, false, "empty user"},
		{"-1", 0, false, "not a valid user name"},
		{"-s", 0, false, "not a valid user name"},
		{"+5", 0, false, "not a valid user name"},
		{"a:b", 0, false, "not a valid user name"},
		{"a b", 0, false, "not a valid user name"},
		{"a\nb", 0, false, "not a valid user name"},
		{"a\x00", 0, false, "not a valid user name"},
		{"\xff", 0, false, "not a valid user name"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			uid, isID, err := parseSpec(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseSpec(%q) = %d, %v, %v; want an error with %q", tc.spec, uid, isID, err, tc.err)
				}
				return
			}
			if err != nil || uid != tc.uid || isID != tc.isID {
				t.Fatalf("parseSpec(%q) = %d, %v, %v; want %d, %v", tc.spec, uid, isID, err, tc.uid, tc.isID)
			}
		})
	}
}

// TestLookupNSSAnswers: what the resolver makes of NSS's answers when
// os/user does not know the user, with getent replaced by canned output.
func TestLookupNSSAnswers(t *testing.T) {
	unknown := func(s string) (*user.User, error) { return nil, user.UnknownUserError(s) }
	unknownID := func(s string) (*user.User, error) { return nil, user.UnknownUserIdError(7) }
	type answer struct {
		out string
		err error
	}
	for _, tc := range []struct {
		name, spec string
		passwd     answer
		groups     answer
		want       *User
		err        string
		unknown    bool // the error wraps os/user's unknown-user error
	}{
		{"by name", "alice", answer{"alice:*:10001:20001::/home/alice:/bin/sh\n", nil}, answer{"alice  27 20001 100\n", nil},
			&User{Name: "alice", UID: 10001, GID: 20001, Home: "/home/alice", Groups: []int{20001, 27, 100}}, "", false},
		{"by uid", "10001", answer{"alice:*:10001:20001::/home/alice:/bin/sh\n", nil}, answer{"alice\n", nil},
			&User{Name: "alice", UID: 10001, GID: 20001, Home: "/home/alice", Groups: []int{20001}}, "", false},
		{"folded case", "Alice", answer{"alice:*:10001:20001::/home/alice:/bin/sh\n", nil}, answer{"alice 1\n", nil},
			&User{Name: "alice", UID: 10001, GID: 20001, Home: "/home/alice", Groups: []int{20001, 1}}, "", false},
		{"not found", "alice", answer{"", errNotFound}, answer{}, nil, `user "alice": user: unknown user alice`, true},
		{"uid not found", "10001", answer{"", errNotFound}, answer{}, nil, `user "10001": user: unknown userid 10001`, true},
		{"other user", "alice", answer{"bob:*:10002:1::/home/bob:/bin/sh\n", nil}, answer{}, nil, "another user (bob", false},
		{"other uid", "10001", answer{"alice:*:10002:1::/home/alice:/bin/sh\n", nil}, answer{}, nil, "another user (alice, uid 10002)", false},
		{"garbled passwd", "alice", answer{"alice:*:x:1::/h:/s\n", nil}, answer{}, nil, `user "alice": NSS answer: passwd entry`, false},
		{"getent fails", "alice", answer{"", errors.New("getent: exit status 1")}, answer{}, nil, `user "alice": getent: exit status 1`, false},
		{"groups fail", "alice", answer{"alice:*:1:1::/h:/s\n", nil}, answer{"", errors.New("exit status 1")}, nil, "groups of user alice: exit status 1", false},
		{"garbled groups", "alice", answer{"alice:*:1:1::/h:/s\n", nil}, answer{"alice x\n", nil}, nil, "groups of user alice: NSS answer", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resolver{byName: unknown, byID: unknownID, groupsFromFiles: func() bool { return true },
				nss: func(db, key string) ([]byte, error) {
					switch db {
					case "passwd":
						if key != tc.spec {
							t.Errorf("getent passwd %q, want the spec %q", key, tc.spec)
						}
						return []byte(tc.passwd.out), tc.passwd.err
					case "initgroups":
						return []byte(tc.groups.out), tc.groups.err
					}
					t.Errorf("getent %s", db)
					return nil, errors.New("unexpected database")
				}}
			u, err := r.lookup(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || u != nil {
					t.Fatalf("lookup(%q) = %+v, %v; want only an error with %q", tc.spec, u, err, tc.err)
				}
				var a user.UnknownUserError
				var b user.UnknownUserIdError
				if got := errors.As(err, &a) || errors.As(err, &b); got != tc.unknown {
					t.Fatalf("lookup(%q): error %v wraps an unknown-user error: %v, want %v", tc.spec, err, got, tc.unknown)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(u, tc.want) {
				t.Fatalf("lookup(%q) = %+v, %v; want %+v", tc.spec, u, err, tc.want)
			}
		})
	}
}

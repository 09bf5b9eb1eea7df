package session_test

import (
	"slices"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// UserEnv is the one place the CLI and the daemon shape a command's
// environment for the account it runs as.
func TestUserEnv(t *testing.T) {
	alice := &session.EnvUser{Home: "/home/alice", Name: "alice"}
	caller := []string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "LOGNAME=root", "MAIL=/var/mail/root",
		"LANG=C.UTF-8", session.SessionEnv + "=s-0123456789ab", "HOMEBREW=x", "TERM=xterm"}
	for _, tc := range []struct {
		name string
		env  []string
		u    *session.EnvUser
		want []string
	}{
		{"as the caller: identity kept, session marker dropped", caller, nil,
			[]string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "LOGNAME=root", "MAIL=/var/mail/root", "LANG=C.UTF-8", "HOMEBREW=x", "TERM=xterm"}},
		{"as another user: identity replaced, MAIL and marker dropped", caller, alice,
			[]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOMEBREW=x", "TERM=xterm", "HOME=/home/alice", "USER=alice", "LOGNAME=alice"}},
		{"identity missing from the caller's environment", []string{"PATH=/bin"}, alice,
			[]string{"PATH=/bin", "HOME=/home/alice", "USER=alice", "LOGNAME=alice"}},
		{"a repeated variable is replaced every time", []string{"HOME=/a", "HOME=/b", session.SessionEnv + "=s-1", session.SessionEnv + "=s-2"}, alice,
			[]string{"HOME=/home/alice", "USER=alice", "LOGNAME=alice"}},
		{"empty", nil, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.env)
			got := session.UserEnv(tc.env, tc.u)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("UserEnv(%q, %+v)\n got %q\nwant %q", tc.env, tc.u, got, tc.want)
			}
			if !slices.Equal(tc.env, in) {
				t.Fatalf("UserEnv changed its input: %q, was %q", tc.env, in)
			}
		})
	}
}

// ScrubEnv drops what the policy scrubs unless it passes it through.
func TestScrubEnv(t *testing.T) {
	e := policy.Env{Scrub: []string{"*_TOKEN", "AWS_*", "SSH_AUTH_SOCK"}, Passthrough: []string{"GH_TOKEN"}}
	for _, tc := range []struct {
		name      string
		env, want []string
	}{
		{"secrets dropped", []string{"PATH=/bin", "NPM_TOKEN=x", "AWS_SECRET_ACCESS_KEY=y", "SSH_AUTH_SOCK=/tmp/a"}, []string{"PATH=/bin"}},
		{"passthrough kept", []string{"GH_TOKEN=z", "GITLAB_TOKEN=w"}, []string{"GH_TOKEN=z"}},
		{"glob matches the whole name", []string{"TOKEN_FILE=a", "MY_TOKEN_X=b"}, []string{"TOKEN_FILE=a", "MY_TOKEN_X=b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := session.ScrubEnv(tc.env, e); !slices.Equal(got, tc.want) {
				t.Fatalf("ScrubEnv(%q) = %q, want %q", tc.env, got, tc.want)
			}
		})
	}
}

func TestEnvValue(t *testing.T) {
	env := []string{"HOME=/a", "PATH=/bin", "HOMEDIR=/x", "HOME=/b", "EMPTY="}
	for name, want := range map[string]string{"HOME": "/b", "PATH": "/bin", "EMPTY": "", "MISSING": "", "HOM": ""} {
		if got := session.EnvValue(env, name); got != want {
			t.Errorf("EnvValue(%q) = %q, want %q", name, got, want)
		}
	}
}

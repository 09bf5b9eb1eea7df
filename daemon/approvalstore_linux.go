//go:build linux

package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/openoxide/oxsupervise/policy"
)

// ApprovalsFile is where "always" answers persist, relative to the
// workspace. It is below .openoxide/, a protected name, so the session it
// governs cannot write it.
const ApprovalsFile = ".openoxide/approvals.toml"

type pendingApproval struct {
	Approval
	answer chan string
}

// maxPendingPerSession bounds the requests one session can have waiting, so
// that an agent cannot flood its user's approval list or the daemon.
const maxPendingPerSession = 8

func (s *Server) pendingFor(sid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.pending {
		if p.Session == sid {
			n++
		}
	}
	return n
}

func newApprovalID() string {
	var b [6]byte
	rand.Read(b[:])
	return "a-" + hex.EncodeToString(b[:])
}

// approvalsDoc is the shape of approvals.toml.
type approvalsDoc struct {
	Approval []storedApproval `toml:"approval"`
}

type storedApproval struct {
	Kind       string    `toml:"kind"`
	Pattern    string    `toml:"pattern"`
	ApprovedBy int       `toml:"approved_by"`
	Time       time.Time `toml:"time"`
}

// readApprovals reads <workspace>/.openoxide/approvals.toml with the
// user's file access; a missing file is an empty list.
func readApprovals(cred credential, workspace string) ([]storedApproval, error) {
	var doc approvalsDoc
	err := asUser(cred, func() error {
		b, err := os.ReadFile(filepath.Join(workspace, ApprovalsFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields().Decode(&doc); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(workspace, ApprovalsFile), err)
		}
		return nil
	})
	return doc.Approval, err
}

// appendApproval adds one entry to the workspace's approvals.toml, as the
// user (so the daemon never writes where the user could not).
func appendApproval(cred credential, workspace string, a storedApproval) error {
	return asUser(cred, func() error {
		path := filepath.Join(workspace, ApprovalsFile)
		var doc approvalsDoc
		if b, err := os.ReadFile(path); err == nil {
			if err := toml.Unmarshal(b, &doc); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, x := range doc.Approval {
			if x.Kind == a.Kind && x.Pattern == a.Pattern {
				return nil
			}
		}
		doc.Approval = append(doc.Approval, a)
		b, err := toml.Marshal(doc)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		tmp := path + ".tmp"
		b = append([]byte("# Commands approved with `oxsupervise approve --always`; written by the oxsupervise daemon.\n"), b...)
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	})
}

// shellJoin quotes argv as one POSIX shell command line, so that a stored
// pattern is matched by the same shell parser `policy check` uses.
func shellJoin(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			b.WriteString(a)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}

// patternMatches reports whether a stored "always" pattern covers argv,
// with the permission matcher of `policy check`.
func patternMatches(pattern string, argv []string) bool {
	p := policy.Permissions{Default: policy.ActionAsk, Rules: []policy.PermissionRule{{Tool: "bash", Pattern: pattern, Action: policy.ActionAllow}}}
	return p.Check("bash", shellJoin(argv), "").Action == policy.ActionAllow
}

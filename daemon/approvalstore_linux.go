//go:build linux

package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/openoxide/oxsupervise/policy"
)

// ApprovalsFile is where "always" answers persist, relative to the
// workspace. It is below .openoxide/, a protected name, so the session it
// governs cannot write it.
const ApprovalsFile = ".openoxide/approvals.toml"

// The approval store has two halves: pendingStore, the requests waiting
// for an answer in memory (what GET /permission lists and POST
// /permission/{id}/reply answers), and approvals.toml in the workspace,
// the "always" answers that outlive the daemon (readApprovals,
// appendApproval). The handlers that ask (exec_linux.go, hostask_linux.go)
// and answer (approvals_linux.go) only go through these.

// maxPendingPerSession bounds the requests one session can have waiting, so
// that an agent cannot flood its user's approval list or the daemon.
const maxPendingPerSession = 8

// Decisions await returns besides a reply.
const (
	decisionTimeout   = "timeout"   // nobody answered in time
	decisionAbandoned = "abandoned" // the asker went away
)

// errNoPending is pendingStore.answer's error for an id that is not
// waiting (answered, expired or never existed).
var errNoPending = errors.New("no such pending approval")

// pendingStore holds the approval requests waiting for an answer.
type pendingStore struct {
	mu      sync.Mutex
	pending map[string]*pendingApproval
}

type pendingApproval struct {
	Approval
	answer chan string
}

func newPendingStore() *pendingStore {
	return &pendingStore{pending: map[string]*pendingApproval{}}
}

// add lists a as pending. When a's session already has
// maxPendingPerSession requests waiting it adds nothing and returns nil and
// that count.
func (st *pendingStore) add(a Approval) (pa *pendingApproval, waiting int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, p := range st.pending {
		if p.Session == a.Session {
			waiting++
		}
	}
	if waiting >= maxPendingPerSession {
		return nil, waiting
	}
	pa = &pendingApproval{Approval: a, answer: make(chan string, 1)}
	st.pending[a.ID] = pa
	return pa, waiting
}

// await waits for pa's answer and returns it: a reply, decisionTimeout when
// timeout passes first (0: no timeout but ctx's), decisionAbandoned when
// ctx ends. pa is no longer pending afterwards.
func (st *pendingStore) await(ctx context.Context, pa *pendingApproval, timeout time.Duration) string {
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	var decision string
	select {
	case decision = <-pa.answer:
	case <-expired:
		decision = decisionTimeout
	case <-ctx.Done():
		decision = decisionAbandoned
	}
	st.mu.Lock()
	delete(st.pending, pa.ID)
	st.mu.Unlock()
	return decision
}

// answer gives reply to the pending request id if may, called with it,
// allows (may's error is the refusal). Only one answer is taken.
func (st *pendingStore) answer(id, reply string, may func(*Approval) error) error {
	st.mu.Lock()
	pa, ok := st.pending[id]
	if !ok {
		st.mu.Unlock()
		return errNoPending
	}
	if err := may(&pa.Approval); err != nil {
		st.mu.Unlock()
		return err
	}
	delete(st.pending, id)
	st.mu.Unlock()
	pa.answer <- reply
	return nil
}

// list returns the pending requests visible allows, oldest first.
func (st *pendingStore) list(visible func(*Approval) bool) []Approval {
	out := []Approval{}
	st.mu.Lock()
	for _, a := range st.pending {
		if visible(&a.Approval) {
			out = append(out, a.Approval)
		}
	}
	st.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Approval) int { return a.Created.Compare(b.Created) })
	return out
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

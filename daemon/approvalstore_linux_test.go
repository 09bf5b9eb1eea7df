//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The pending store bounds each session's waiting requests, gives each
// request at most one answer and only to an answerer may admits, and ends
// a wait on an answer, on its timeout or when the asker goes away.
func TestPendingStore(t *testing.T) {
	st := newPendingStore()
	t0 := time.Unix(1_800_000_000, 0)
	var first *pendingApproval
	for i := 0; i < maxPendingPerSession; i++ {
		pa, n := st.add(Approval{ID: fmt.Sprintf("a-%d", i), Session: "s-1", UID: 1000, Created: t0.Add(time.Duration(i) * time.Second)})
		if pa == nil || n != i {
			t.Fatalf("request %d of s-1: added %v with %d waiting", i, pa != nil, n)
		}
		if i == 0 {
			first = pa
		}
	}
	if pa, n := st.add(Approval{ID: "a-over", Session: "s-1"}); pa != nil || n != maxPendingPerSession {
		t.Fatalf("request beyond the bound: added %v with %d waiting, want refused with %d", pa != nil, n, maxPendingPerSession)
	}
	if pa, _ := st.add(Approval{ID: "a-other", Session: "s-2", UID: 1001, Created: t0.Add(-time.Second)}); pa == nil {
		t.Fatal("another session's request was refused by s-1's bound")
	}
	mine := st.list(func(a *Approval) bool { return a.UID == 1000 })
	if len(mine) != maxPendingPerSession || mine[0].ID != "a-0" || mine[len(mine)-1].ID != fmt.Sprintf("a-%d", maxPendingPerSession-1) {
		t.Fatalf("uid 1000's list: %+v, want its %d requests oldest first", mine, maxPendingPerSession)
	}
	if all := st.list(func(*Approval) bool { return true }); len(all) != maxPendingPerSession+1 || all[0].ID != "a-other" {
		t.Fatalf("full list: %d entries starting %q, want %d starting a-other", len(all), all[0].ID, maxPendingPerSession+1)
	}

	refused := errors.New("not yours")
	for _, tc := range []struct {
		name, id string
		may      error
		want     error
	}{
		{"refused answerer", "a-0", refused, refused},
		{"unknown id", "a-nope", nil, errNoPending},
		{"answer", "a-0", nil, nil},
		{"second answer", "a-0", nil, errNoPending},
	} {
		err := st.answer(tc.id, ReplyOnce, func(*Approval) error { return tc.may })
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := st.await(context.Background(), first, time.Hour); got != ReplyOnce {
		t.Fatalf("await after an answer: %q, want %q", got, ReplyOnce)
	}

	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		want    string
	}{
		{"timeout", time.Nanosecond, false, decisionTimeout},
		{"asker gone", 0, true, decisionAbandoned},
	} {
		pa, _ := st.add(Approval{ID: "a-" + tc.name, Session: "s-3"})
		ctx, cancel := context.WithCancel(context.Background())
		if tc.cancel {
			cancel()
		}
		if got := st.await(ctx, pa, tc.timeout); got != tc.want {
			t.Fatalf("%s: %q, want %q", tc.name, got, tc.want)
		}
		cancel()
		if err := st.answer(pa.ID, ReplyOnce, func(*Approval) error { return nil }); !errors.Is(err, errNoPending) {
			t.Fatalf("%s: still pending after the wait ended (%v)", tc.name, err)
		}
	}
}

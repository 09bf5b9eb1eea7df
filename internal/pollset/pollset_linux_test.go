//go:build linux

package pollset

import (
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pipe returns a pipe's read and write descriptors, closed at the end.
func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// threads is how many threads this process has.
func threads(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestSet(t *testing.T) {
	r1, w1 := pipe(t)
	r2, w2 := pipe(t)
	s, err := New(r1, r2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	cases := []struct {
		name  string
		write []int // write descriptors written to before the call
		want  []int
	}{
		{name: "deadline passes", want: nil},
		{name: "one readable", write: []int{w2}, want: []int{r2}},
		{name: "still readable until read (level-triggered)", want: []int{r2}},
		{name: "both readable", write: []int{w1}, want: []int{r1, r2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.write {
				if _, err := unix.Write(w, []byte{1}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Wait(time.Now().Add(20*time.Millisecond), nil)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ready %v, want %v", got, tc.want)
			}
		})
	}
}

// A Wait with no deadline returns when a descriptor becomes readable
// later, and many of them under way hold no thread each.
func TestWaitHoldsNoThread(t *testing.T) {
	const waiters = 16
	before := threads(t)
	type waiter struct {
		w    int
		done chan []int
	}
	var ws []waiter
	for range waiters {
		r, w := pipe(t)
		s, err := New(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		done := make(chan []int, 1)
		go func() {
			got, err := s.Wait(time.Time{}, nil)
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
		ws = append(ws, waiter{w, done})
	}
	// Every waiter parked: none has returned, and the thread count did not
	// grow with them (a blocking wait each would add one per waiter).
	time.Sleep(50 * time.Millisecond)
	if n := threads(t); n-before >= waiters/2 {
		t.Errorf("%d waiters: %d threads, %d before", waiters, n, before)
	}
	for _, w := range ws {
		select {
		case got := <-w.done:
			t.Fatalf("a wait returned %v before anything was written", got)
		default:
		}
		unix.Write(w.w, []byte{1})
	}
	for _, w := range ws {
		select {
		case got := <-w.done:
			if len(got) != 1 {
				t.Errorf("ready %v, want one descriptor", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a wait did not return after its descriptor became readable")
		}
	}
}

// Close ends a wait under way with an error.
func TestCloseEndsWait(t *testing.T) {
	r, _ := pipe(t)
	s, err := New(r)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Wait(time.Time{}, nil)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("a wait on a closed set returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}

func TestNewRefusesBadDescriptor(t *testing.T) {
	if _, err := New(-1); err == nil {
		t.Error("New(-1) succeeded")
	}
}

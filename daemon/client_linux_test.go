//go:build linux

package daemon

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// A run's final event is its answer: Run returns with it while the daemon
// still holds the stream open (it ends it only after releasing the
// session), instead of reading on to the stream's end. The server here
// ends its stream only once Run has returned, so a Run that read on would
// never return.
func TestRunReturnsAtTheFinalEvent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{})
	ended := make(chan bool, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		es := newEventStream(w)
		es.send(Event{Event: "started", Session: "s1"})
		es.send(Event{Event: "exit", Session: "s1", Code: 3})
		select {
		case <-returned:
			ended <- true
		case <-r.Context().Done():
			ended <- false
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	var events []string
	final, err := (&Client{Socket: sock}).Run(context.Background(), RunRequest{Argv: []string{"true"}},
		[3]*os.File{pr, pw, pw}, func(e Event) { events = append(events, e.Event) })
	close(returned)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final.Event != "exit" || final.Code != 3 || final.Session != "s1" {
		t.Errorf("final event %+v, want exit of s1 with code 3", final)
	}
	if len(events) != 1 || events[0] != "started" {
		t.Errorf("events before the final one: %q, want [started]", events)
	}
	// Either way the handler ends: Run returned (and the stream was
	// still open) or the client's close reached it first.
	<-ended
}

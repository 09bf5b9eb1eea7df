// Package modelapi holds scripted stand-ins for the model-provider APIs the
// agents talk to (the Anthropic Messages API with SSE streaming for Claude
// Code, the OpenAI Responses API for Codex), for tests that drive the real
// agent CLIs. A stand-in answers every conversation with a fixed script of
// shell tool calls, one per turn, and records the result the agent sends
// back for each. It is the only part of those tests that is not real: the
// model is outside the machine.
package modelapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Step is one scripted tool call: the shell command the model asks the
// agent to run.
type Step struct {
	// Name identifies the step in Results.
	Name    string
	Command string
}

// Result is what the agent sent back for a step.
type Result struct {
	Step   string
	Output string
	// IsError is the agent's own flag for a failed tool call (Anthropic's
	// is_error; Codex reports the exit code inside Output).
	IsError bool
}

// Server is a stand-in listening on 127.0.0.1.
type Server struct {
	// URL is the base URL the agent's base-URL setting points at
	// ("http://127.0.0.1:PORT").
	URL string
	// Addr is the listener's host:port.
	Addr string

	script []Step
	srv    *http.Server

	mu       sync.Mutex
	results  map[string]Result
	requests []string // method and path of every request, in order
	done     bool     // the script ran to its end and the final text was sent
}

// ErrIncomplete says the agent did not send back a result for every step.
var ErrIncomplete = errors.New("modelapi: the agent did not finish the script")

func start(script []Step, h func(s *Server) http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("modelapi: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(), script: script, results: map[string]Result{}}
	s.srv = &http.Server{Handler: s.logged(h(s)), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *Server) logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// Close stops the listener.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Results returns the recorded result of every step the agent answered,
// by step name.
func (s *Server) Results() map[string]Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Result, len(s.results))
	for k, v := range s.results {
		out[k] = v
	}
	return out
}

// Requests lists the method and path of every request the stand-in saw.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Done reports whether the agent answered every step and was sent the
// final message.
func (s *Server) Done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// record stores a tool result for the step with the given index.
func (s *Server) record(i int, output string, isErr bool) {
	if i < 0 || i >= len(s.script) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[s.script[i].Name] = Result{Step: s.script[i].Name, Output: output, IsError: isErr}
}

func (s *Server) finish() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// FinalText is the model's last message, after the last step's result.
const FinalText = "All scripted steps ran."

// callID names the tool call of step i; the agents echo it back with the
// result, which is how a result finds its step.
func callID(prefix string, i int) string { return fmt.Sprintf("%s_step_%02d", prefix, i) }

func stepOf(prefix, id string) int {
	var i int
	if _, err := fmt.Sscanf(id, prefix+"_step_%02d", &i); err != nil {
		return -1
	}
	return i
}

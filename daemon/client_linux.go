//go:build linux

package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/session"
)

// Client talks to the daemon on its socket.
type Client struct {
	Socket string
}

func (c *Client) socket() string {
	if c.Socket == "" {
		return DefaultSocket
	}
	return c.Socket
}

// Available reports whether a daemon answers on socket ("" = default).
func Available(socket string) bool {
	return Probe(socket) == nil
}

// ErrNoDaemon is the error of Probe, Run and Exec when nothing listens on
// the socket (for Run and Exec: nothing was sent).
var ErrNoDaemon = errors.New("no daemon listening")

// probeTimeout bounds the health check: a daemon busy starting many
// sessions answers slowly, and a client that gave up too early would fall
// back to a standalone run it cannot do.
const probeTimeout = 10 * time.Second

// Probe asks the daemon at socket for its health. It returns nil when the
// daemon answered, an error wrapping ErrNoDaemon when no daemon listens
// there (no socket, connection refused), and any other error when one
// listens but did not answer properly.
func Probe(socket string) error { return probe(socket, probeTimeout) }

func probe(socket string, timeout time.Duration) error {
	c := &Client{Socket: socket}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out map[string]any
	err := c.do(ctx, http.MethodGet, "/health", nil, &out)
	switch {
	case err == nil:
		return nil
	case absent(err):
		return fmt.Errorf("%w at %s: %v", ErrNoDaemon, socket, err)
	default:
		return fmt.Errorf("daemon at %s did not answer its health check: %w", socket, err)
	}
}

// absent reports whether a dial error means nothing listens on the socket
// (no socket file, connection refused, not a socket) rather than a daemon
// that listens but failed.
func absent(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOTSOCK)
}

func (c *Client) dial(ctx context.Context) (*net.UnixConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket())
	if err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", c.socket(), err)
	}
	return conn.(*net.UnixConn), nil
}

func (c *Client) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return c.dial(ctx) },
		DisableKeepAlives: true,
	}}
}

// responseError turns a non-2xx response into an *Error.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e.Code, e.Message = "internal", fmt.Sprintf("daemon answered %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return e
}

// do sends one JSON request and decodes the JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://oxsupervise"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("daemon at %s: %w", c.socket(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return responseError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("daemon answer to %s %s: %w", method, path, err)
	}
	return nil
}

// stream sends a request carrying stdio as SCM_RIGHTS and calls onEvent for
// every event of the answer until a final one (exit, error, rejected),
// which it returns. With untilFinal the final event is the whole answer:
// the connection is closed without reading the stream to its end, which
// the daemon writes only once it is done with the request (for a run:
// after releasing the settled session, 0.3-1.5 ms after the final event
// here; issue 18). Without it, whatever the daemon does after the final
// event (an exec's last audit record) is done when stream returns.
func (c *Client) stream(ctx context.Context, path string, in any, stdio [3]*os.File, onEvent func(Event), untilFinal bool) (Event, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return Event{}, err
	}
	conn, err := c.dial(ctx)
	if err != nil {
		// Nothing was sent: the caller may fall back as a failed Probe
		// would have let it, without a health check of its own first.
		if absent(err) {
			return Event{}, fmt.Errorf("%w at %s: %v", ErrNoDaemon, c.socket(), err)
		}
		return Event{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, err := http.NewRequest(http.MethodPost, "http://oxsupervise"+path, bytes.NewReader(b))
	if err != nil {
		return Event{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		return Event{}, err
	}
	rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	data := wire.Bytes()
	n, _, err := conn.WriteMsgUnix(data, rights, nil)
	if err == nil && n < len(data) {
		_, err = conn.Write(data[n:])
	}
	if err != nil {
		return Event{}, fmt.Errorf("send request to daemon: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return Event{}, fmt.Errorf("daemon answer: %w", err)
	}
	if !untilFinal {
		defer resp.Body.Close()
	}
	if resp.StatusCode != http.StatusOK {
		return Event{}, responseError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return Event{}, fmt.Errorf("daemon event %q: %w", sc.Bytes(), err)
		}
		switch e.Event {
		case "exit", "error", "rejected":
			return e, nil
		}
		if onEvent != nil {
			onEvent(e)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return Event{}, fmt.Errorf("daemon stream: %w", err)
	}
	if ctx.Err() != nil {
		return Event{}, ctx.Err()
	}
	return Event{}, errors.New("daemon closed the stream before the command finished")
}

// Run creates a session running req.Argv with stdio as its standard
// streams and waits for it; the final event carries the exit status.
func (c *Client) Run(ctx context.Context, req RunRequest, stdio [3]*os.File, onEvent func(Event)) (Event, error) {
	// A run's final event is sent once its session has settled (every
	// process gone, every record in the audit log): nothing the client
	// must wait for comes after it.
	return c.stream(ctx, "/sessions", req, stdio, onEvent, true)
}

// Exec asks, from inside a session, to run req.Argv outside it.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdio [3]*os.File, onEvent func(Event)) (Event, error) {
	return c.stream(ctx, "/exec", req, stdio, onEvent, false)
}

// Sessions lists the sessions the caller may see.
func (c *Client) Sessions(ctx context.Context) ([]session.Status, error) {
	var out []session.Status
	err := c.do(ctx, http.MethodGet, "/sessions", nil, &out)
	return out, err
}

// Stop stops a session.
func (c *Client) Stop(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/sessions/"+id, nil, nil)
}

// Signal forwards sig to a session's command.
func (c *Client) Signal(ctx context.Context, id string, sig int) error {
	return c.do(ctx, http.MethodPost, "/sessions/"+id+"/signal", SignalRequest{Signal: sig}, nil)
}

// Attach confines a process of the caller's.
func (c *Client) Attach(ctx context.Context, req AttachRequest) (AttachResult, error) {
	var out AttachResult
	err := c.do(ctx, http.MethodPost, "/sessions/attach", req, &out)
	return out, err
}

// Approvals lists the pending approvals the caller may answer.
func (c *Client) Approvals(ctx context.Context) ([]Approval, error) {
	var out []Approval
	err := c.do(ctx, http.MethodGet, "/permission", nil, &out)
	return out, err
}

// Reply answers an approval: ReplyOnce, ReplyAlways or ReplyReject.
func (c *Client) Reply(ctx context.Context, id, reply string) error {
	return c.do(ctx, http.MethodPost, "/permission/"+id+"/reply", ReplyRequest{Reply: reply}, nil)
}

// Check asks for a permission decision.
func (c *Client) Check(ctx context.Context, req CheckRequest) (CheckResponse, error) {
	var out CheckResponse
	err := c.do(ctx, http.MethodPost, "/permission/check", req, &out)
	return out, err
}

// AuditTail streams the audit records the caller may read (its own
// sessions'; every record for root and admins), calling fn with each raw
// JSON line until the stream ends (or, with q.Follow, ctx ends).
func (c *Client) AuditTail(ctx context.Context, q AuditQuery, fn func(line []byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://oxsupervise/audit?"+q.Values().Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("daemon at %s: %w", c.socket(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), MaxRequestBytes)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("daemon audit stream: %w", err)
	}
	return ctx.Err()
}

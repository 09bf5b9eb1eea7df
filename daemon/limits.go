package daemon

import "time"

// Connection limits (see Options.MaxConns). A run request holds its
// connection for as long as its session lives, so the bounds are well
// above the sessions one user runs.
const (
	DefaultMaxConns       = 512
	DefaultMaxConnsPerUID = 64
	// DefaultHeaderTimeout bounds reading a request's headers, and
	// DefaultBodyTimeout reading its body (at most MaxRequestBytes): a
	// client that stops sending mid-request is disconnected.
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	// idleTimeout closes kept-alive connections that send no request.
	idleTimeout = 2 * time.Minute
)

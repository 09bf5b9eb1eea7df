package testutil

import (
	"net"
	"testing"
)

// Serve accepts connections on ln until the test ends (ln is closed then)
// and hands each to handle, in the accept loop (a handle that takes time
// starts its own goroutine); a nil handle closes each connection at once: a
// destination that only has to exist. It returns ln.
func Serve(tb testing.TB, ln net.Listener, handle func(net.Conn)) net.Listener {
	tb.Helper()
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if handle == nil {
				c.Close()
				continue
			}
			handle(c)
		}
	}()
	return ln
}

//go:build linux

package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter bounds the connections the daemon holds open, in all and per
// uid, so that one user (or a confined agent) opening connections and
// never finishing a request cannot take every slot, descriptor and
// goroutine. Root is never refused: it is the operator who must be able to
// list and stop sessions during such a flood.
type connLimiter struct {
	maxTotal, maxPerUID int

	mu    sync.Mutex
	total int
	byUID map[int]int
}

func newConnLimiter(maxTotal, maxPerUID int) *connLimiter {
	return &connLimiter{maxTotal: maxTotal, maxPerUID: maxPerUID, byUID: map[int]int{}}
}

// admit counts a new connection of uid and returns the function that
// uncounts it, or the reason it is refused.
func (l *connLimiter) admit(uid int) (release func(), refused string) {
	if l == nil {
		return func() {}, ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if uid != 0 {
		if l.byUID[uid] >= l.maxPerUID {
			return nil, fmt.Sprintf("uid %d already has %d connections open to the daemon (the limit per user)", uid, l.byUID[uid])
		}
		if l.total >= l.maxTotal {
			return nil, fmt.Sprintf("the daemon already has %d connections open (its limit)", l.total)
		}
	}
	l.total++
	l.byUID[uid]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.byUID[uid]--; l.byUID[uid] <= 0 {
				delete(l.byUID, uid)
			}
		})
	}, ""
}

// refuseConn answers a connection over the limits with a 503 and closes
// it, without reading its request. The write is bounded: a client that
// does not read cannot hold the daemon.
func refuseConn(uc *net.UnixConn, why string) {
	defer uc.Close()
	body, _ := json.Marshal(Error{Code: "busy", Message: why})
	uc.SetDeadline(time.Now().Add(time.Second))
	// The answer follows the request's headers (read briefly and
	// boundedly): HTTP clients drop an answer that comes before their
	// request, and a close before it makes their write fail with EPIPE
	// instead of telling them why.
	http.ReadRequest(bufio.NewReader(io.LimitReader(uc, 64<<10)))
	fmt.Fprintf(uc, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	uc.CloseWrite()
	io.Copy(io.Discard, io.LimitReader(uc, MaxRequestBytes))
}

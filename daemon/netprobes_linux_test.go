//go:build linux

package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// connectVerb makes this test binary connect to one TCP address and print
// "ADDR=ok" or "ADDR=<errno name>": the probe run inside sessions.
var connectVerb = testutil.OpArgs("connect")[0]

func connectMain(addr string) int {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err == nil {
		c.Close()
		fmt.Printf("%s=ok\n", addr)
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		fmt.Printf("%s=%s\n", addr, unix.ErrnoName(errno))
	} else {
		fmt.Printf("%s=%v\n", addr, err)
	}
	return 1
}

// lookupVerb makes this test binary send one DNS A query for a name to a
// server, then connect to an address, printing one line
// "NAME rcode=RCODE answer=IP,... ADDR=ok|<errno name>": the probe of
// hostname approvals run inside sessions.
var lookupVerb = testutil.OpArgs("lookup")[0]

func lookupMain(name, server, addr string) int {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	// Longer than any ask timeout the tests set: the resolver's answer,
	// not the client's patience, must end the lookup.
	c := &dns.Client{Net: "udp", Timeout: 15 * time.Second}
	m, _, err := c.Exchange(q, server)
	rcode := "error:" + fmt.Sprint(err)
	var answers []string
	if err == nil {
		rcode = dns.RcodeToString[m.Rcode]
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				answers = append(answers, a.A.String())
			}
		}
	}
	fmt.Printf("%s rcode=%s answer=%s ", name, rcode, strings.Join(answers, ","))
	return connectMain(addr)
}

// listenVerb makes this test binary accept TCP connections on an address
// until killed: a peer in a network namespace a test creates.
var listenVerb = testutil.OpArgs("listen")[0]

func listenMain(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		c.Close()
	}
}

// serveFakeDNS answers A queries for the names of answers on a loopback
// UDP port and returns its address.
func serveFakeDNS(answers map[string]string) (string, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		ip, ok := answers[strings.TrimSuffix(strings.ToLower(q.Name), ".")]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.ParseIP(ip).To4()})
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	return pc.LocalAddr().String(), nil
}

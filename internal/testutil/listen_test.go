package testutil

import (
	"io"
	"net"
	"testing"
)

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, ln, func(c net.Conn) {
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Errorf("echo through Serve: %q, %v", buf, err)
	}

	closing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, closing, nil)
	c2, err := net.Dial("tcp", closing.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if n, err := c2.Read(buf); err != io.EOF {
		t.Errorf("read from a nil-handle Serve: %d bytes, %v; want EOF (closed)", n, err)
	}
}

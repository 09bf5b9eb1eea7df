// Command netburst makes N TCP connects to IPV4:PORT as fast as it can and
// prints how many the kernel refused with EPERM, so a test can check that
// every refusal is accounted for in the audit log.
//
//	netburst N IPV4:PORT
package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: netburst N IPV4:PORT")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	ap, perr := netip.ParseAddrPort(os.Args[2])
	if err != nil || perr != nil || !ap.Addr().Is4() {
		fmt.Fprintln(os.Stderr, "usage: netburst N IPV4:PORT")
		os.Exit(2)
	}
	sa := &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	var eperm, other int
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "socket:", err)
			os.Exit(1)
		}
		switch err := unix.Connect(fd, sa); err {
		case unix.EPERM:
			eperm++
		default:
			other++
		}
		unix.Close(fd)
	}
	fmt.Printf("eperm=%d\nother=%d\n", eperm, other)
}

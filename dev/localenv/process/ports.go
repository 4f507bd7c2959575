package process

import (
	"fmt"
	"net"
	"strconv"
)

// FreePort asks the kernel for a free TCP port on ip.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ResolvePort returns port if it is free, a free port if port is 0, and an
// error that names the flag to change when the port is taken.
func ResolvePort(ip string, port int, what, flag string) (int, error) {
	if port == 0 {
		return FreePort(ip)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("%s port %d on %s is already in use (choose another with %s, or 0 for any free port)", what, port, ip, flag)
	}
	l.Close()
	return port, nil
}

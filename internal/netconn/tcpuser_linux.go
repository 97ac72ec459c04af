package netconn

import "golang.org/x/sys/unix"

// setTCPUserTimeout sets TCP_USER_TIMEOUT, in milliseconds, on the socket.
func setTCPUserTimeout(fd uintptr, ms int) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
}

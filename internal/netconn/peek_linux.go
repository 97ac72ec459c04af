//go:build linux

package netconn

import "syscall"

// peekFD runs inside RawConn.Control, on a socket the runtime keeps open
// for the duration of the call. MSG_DONTWAIT keeps it from blocking and
// MSG_PEEK leaves what it finds for the connection's real reader.
func (p *Peeker) peekFD(fd uintptr) {
	n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		p.res = PeekEmpty
	case err != nil:
		p.res = PeekClosed
	case n == 0:
		p.res = PeekClosed
	default:
		p.res = PeekPending
	}
}

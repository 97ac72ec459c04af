//go:build linux

package sockpeek

import "syscall"

// peekFD runs inside RawConn.Read. It returns true so that the runtime never
// parks the goroutine waiting for the socket to become readable: the peek must
// not block.
func (p *Peeker) peekFD(fd uintptr) bool {
	n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		p.res = Empty
	case err != nil:
		p.res = Closed
	case n == 0:
		p.res = Closed
	default:
		p.res = Pending
	}
	return true
}

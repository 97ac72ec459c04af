package netconn

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The dialer ParseConfig installs (DialFunc) sets TCP_USER_TIMEOUT and the keepalives
// on the socket it returns.
func TestDialFuncSetsSocketOptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tt := range []struct {
		timeout time.Duration
		wantMS  int
	}{
		{3 * time.Second, 3000},
		{0, 0}, // the kernel's default
	} {
		conn, err := DialFunc(tt.timeout)(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		rc, err := conn.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var ms, idle, keepalive int
		var gerr error
		rc.Control(func(fd uintptr) {
			if ms, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); gerr != nil {
				return
			}
			if idle, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE); gerr != nil {
				return
			}
			keepalive, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		})
		conn.Close()
		if gerr != nil {
			t.Fatal(gerr)
		}
		if ms != tt.wantMS || keepalive != 1 || idle != int(keepAliveIdle/time.Second) {
			t.Errorf("tcp_user_timeout %v: TCP_USER_TIMEOUT = %d ms, SO_KEEPALIVE = %d, TCP_KEEPIDLE = %d s; want %d, 1, %d",
				tt.timeout, ms, keepalive, idle, tt.wantMS, int(keepAliveIdle/time.Second))
		}
	}
}

package follow

import (
	"net"
	"testing"
)

// TestConnectChainMarks: an entry's mark survives pgconn's way of turning
// a looked-up address into host:port, and comes off whole.
func TestConnectChainMarks(t *testing.T) {
	for _, tc := range []struct{ resolved, port, want string }{
		{"127.0.0.1", "5432", "127.0.0.1:5432"},
		{"::1", "5432", "[::1]:5432"},
		{"fe80::1%eth0", "5432", "[fe80::1%eth0]:5432"},
		{"10.0.0.7:6000", "5432", "10.0.0.7:6000"},
	} {
		marked := markAddr(tc.resolved, 7)
		// pgconn: an address with a port keeps it, any other gets the
		// entry's port.
		addr := marked
		if _, _, err := net.SplitHostPort(marked); err != nil {
			addr = net.JoinHostPort(marked, tc.port)
		}
		real, i, ok := unmarkAddr(addr)
		if !ok || i != 7 || real != tc.want {
			t.Errorf("%s: dialled %q gives %q, %d, %v; want %q, 7", tc.resolved, addr, real, i, ok, tc.want)
		}
	}
	for _, addr := range []string{"127.0.0.1:5432", "[::1]:5432", "/tmp/.s.PGSQL.5432", "db%pgfailover-x:1"} {
		if _, _, ok := unmarkAddr(addr); ok {
			t.Errorf("%q read as marked", addr)
		}
	}
}

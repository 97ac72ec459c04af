//go:build !linux

package netconn

// setTCPUserTimeout does nothing: tcp_user_timeout is a Linux socket
// option, and like libpq pgfailover ignores it elsewhere. Keepalives still
// bound how long a silent peer goes unnoticed.
func setTCPUserTimeout(uintptr, int) error { return nil }

// Package sockpeek tells, without blocking and without consuming anything,
// whether an idle database connection already has bytes or an end-of-file
// waiting in its socket.
//
// An idle PostgreSQL connection should have nothing to read. When the server
// shuts down or terminates the backend, it writes a FATAL message (or just
// closes the socket) that sits unread until the client next uses the
// connection. Sending a statement on such a connection wastes the call and,
// worse, makes the outcome of a write look uncertain. A peek before the
// statement is sent turns that uncertainty into proof: the connection was
// already dead, so nothing was sent.
package sockpeek

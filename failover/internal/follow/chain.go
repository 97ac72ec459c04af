package follow

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// connectChain makes one new connection of a following pool go on to
// another host when the host chosen for it refuses it before the session
// is ready: the dial fails, the server says it is starting up or shutting
// down (57P03) or has too many clients, or it is in a role the pool's
// target refuses. Nothing of the caller's has run then, so the connect
// may move on, as the Pool's own calls do: its Walk chooses the next
// usable host at once, the same host after a backoff, or waits while none
// can take it, and ends the chain when its budget is spent.
//
// pgxpool gives no hook that could try a connect again, so the chain uses
// pgconn's own: its list of fallback attempts, dialled in order until one
// gives a session. The list holds, after the chosen host's connection
// variants, every host's variants again, round after round; the chain's
// DialFunc decides at each entry whether it is the one to dial (the host
// chosen for the attempt under way) or to pass over at once. Each entry
// keeps its host's own name and TLS settings, so verify-full checks the
// certificate of the host actually dialled.
//
// pgconn runs a connect in one goroutine: the lookups of every entry
// first, then the dials in order, each followed by its startup and the
// role check. It also dials cancel requests through the same DialFunc,
// from other goroutines: for a live session, and for an attempt whose
// startup failed. The chain tells them apart by the address: its lookup
// gives every address of an entry a mark (127.0.0.1%pgfailover-3), which
// the dial takes off again, and a cancel request goes to the server's own
// address, which has none, so it is dialled as it is and touches nothing
// of the chain. The chain's other fields are used by the connect's
// goroutine alone. A connect error shows the marked addresses.
//
// A host on a unix socket is tried only as the chosen host, first: its
// path cannot be marked.
type connectChain struct {
	set    *hostpool.Set
	walk   Walk
	target hosthealth.Target
	dial   pgconn.DialFunc   // the configured dialer
	lookup pgconn.LookupFunc // the configured resolver

	entries  []chainEntry
	resolved int // entries looked up so far (pgconn looks them up in order)
	// firstSocket is set while the first entry is a unix socket not yet
	// dialled: pgconn dials a socket by its path, without a lookup, so
	// that one dial cannot carry a mark.
	firstSocket atomic.Bool

	current *hostpool.Host  // the host of the attempt under way, nil between attempts
	since   hoststate.Epoch // current's epoch when its last dial began (hoststate.Owner.Epoch)
	round   int             // the round of the entries the attempt uses, -1 until one is dialled
	reached bool            // the attempt's dial worked
	refused bool            // the attempt's server was in the wrong role
	err     error           // why the chain gave up; every later entry returns it
}

// chainEntry is one connection variant of one host in one round.
type chainEntry struct {
	h       *hostpool.Host
	round   int
	variant *pgconn.FallbackConfig
}

// errPassedOver is what an entry returns when its host is not the one
// chosen for the attempt under way. No connection is made.
type errPassedOver struct{ addr string }

func (e *errPassedOver) Error() string {
	return "pgfailover: " + e.addr + " passed over: another host was chosen for this connection"
}

// ConnectError stands for an attempt that gave no session: its dial
// failed, or (Reached) its server ended the session before it was ready.
// The server's own error is among the connect error's causes.
type ConnectError struct {
	Addr    string
	Reached bool
}

func (e *ConnectError) Error() string {
	if e.Reached {
		return "pgfailover: " + e.Addr + " refused the new connection"
	}
	return "pgfailover: " + e.Addr + " could not be reached for the new connection"
}

// errChainEnded is what the entries after the one that gave up return.
var errChainEnded = errors.New("pgfailover: connect given up")

// newConnectChain starts the chain for one connection of f, walked by w:
// the first host is chosen at once (waiting while none can take it), and
// cc is pointed at the chain's entries, rounds rounds of every host's.
func (f *Pool) newConnectChain(w Walk, cc *pgx.ConnConfig) error {
	h, err := w.Pick()
	if err != nil {
		return err
	}
	ch := &connectChain{set: f.set, walk: w, target: f.target, dial: cc.DialFunc, lookup: cc.LookupFunc, current: h, round: -1}
	if ch.dial == nil {
		var d net.Dialer
		ch.dial = d.DialContext
	}
	if ch.lookup == nil {
		ch.lookup = net.DefaultResolver.LookupHost
	}
	ch.addEntries(h, 0)
	ch.firstSocket.Store(isSocket(ch.entries[0].variant))
	hosts := f.set.Hosts()
	for round := 1; round <= f.rounds; round++ {
		for _, k := range hosts {
			if !isSocket(&pgconn.FallbackConfig{Host: k.Dial.Host, Port: k.Dial.Port}) {
				ch.addEntries(k, round)
			}
		}
	}

	first := ch.entries[0].variant
	cc.Host, cc.Port, cc.TLSConfig = first.Host, first.Port, first.TLSConfig.Clone()
	cc.Fallbacks = nil
	for _, e := range ch.entries[1:] {
		cc.Fallbacks = append(cc.Fallbacks, hostpool.CopyFallback(e.variant))
	}
	cc.LookupFunc = ch.lookupFunc
	cc.DialFunc = ch.dialFunc
	cc.ValidateConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
		h := ch.current
		if h == nil {
			// Not a session of the chain's dials (a user's BeforeConnect
			// gave pgconn other addresses): the host is unknown.
			return errors.New("pgfailover: a new connection reached a server outside the Pool's hosts")
		}
		if err := f.set.CheckRole(ctx, h, conn, f.target, ch.since); err != nil {
			// pgconn closes the session and the chain goes on. A wrong
			// role was recorded by CheckRole, and a login older than the
			// host's latest failure found the host marked already: neither
			// costs an attempt.
			_, ch.refused = errors.AsType[*hosthealth.RoleError](err)
			ch.refused = ch.refused || err == hostpool.ErrFailedWhileConnecting
			return err
		}
		hostpool.StateOf(conn).Host = h
		f.connected(h.Addr)
		w.Connected()
		return nil
	}
	return nil
}

// addEntries appends host h's connection variants for round.
func (ch *connectChain) addEntries(h *hostpool.Host, round int) {
	ch.entries = append(ch.entries, chainEntry{h: h, round: round, variant: &pgconn.FallbackConfig{
		Host: h.Dial.Host, Port: h.Dial.Port, TLSConfig: h.Dial.TLSConfig,
	}})
	for _, v := range h.Dial.Fallbacks {
		ch.entries = append(ch.entries, chainEntry{h: h, round: round, variant: v})
	}
}

// lookupFunc resolves an entry's host with the configured resolver and
// marks each address with the entry's number. pgconn looks up every entry
// but unix sockets, in order, before it dials any.
func (ch *connectChain) lookupFunc(ctx context.Context, host string) ([]string, error) {
	for ch.resolved < len(ch.entries) && isSocket(ch.entries[ch.resolved].variant) {
		ch.resolved++
	}
	addrs, err := ch.lookup(ctx, host)
	if err != nil || ch.resolved >= len(ch.entries) {
		return addrs, err
	}
	i := ch.resolved
	ch.resolved++
	marked := make([]string, len(addrs))
	for j, a := range addrs {
		marked[j] = markAddr(a, i)
	}
	return marked, nil
}

// dialFunc dials an entry's address if the entry belongs to the host
// chosen for the attempt under way, choosing that host first when the
// previous attempt has failed. An address without a mark is a cancel
// request's, dialled as it is.
func (ch *connectChain) dialFunc(ctx context.Context, network, addr string) (net.Conn, error) {
	real, i, ok := unmarkAddr(addr)
	if ok && i >= len(ch.entries) {
		ok, real = false, addr
	}
	if !ok {
		if network != "unix" || !ch.firstSocket.CompareAndSwap(true, false) {
			return ch.dial(ctx, network, addr)
		}
		real, i = addr, 0
	}
	addr = real
	e := ch.entries[i]
	if ch.err != nil {
		return nil, errChainEnded
	}
	if ch.current != nil && ch.round >= 0 && (e.round != ch.round || e.h != ch.current) {
		// The attempt's entries are behind: every one of them failed.
		if err := ch.failed(); err != nil {
			ch.err = err
			return nil, err
		}
	}
	if ch.current == nil {
		h, err := ch.walk.Pick()
		if err != nil {
			ch.err = err
			return nil, err
		}
		ch.current, ch.round = h, -1
		if outcome.CallerDone(ctx) {
			// The wait outlasted this entry's connect_timeout; the
			// chosen host's next entry dials with a fresh one.
			return nil, &errPassedOver{addr: e.h.Addr}
		}
	}
	if e.h != ch.current || (ch.round >= 0 && e.round != ch.round) {
		return nil, &errPassedOver{addr: e.h.Addr}
	}
	ch.round = e.round
	ch.since = ch.set.EpochOf(e.h)
	conn, err := ch.dial(ctx, network, addr)
	if err == nil {
		ch.reached = true
	}
	return conn, err
}

// failed settles the attempt on ch.current, which did not give a session,
// with the walk (Walk.Failed). It returns the error that ends the chain
// when the walk's budget is spent.
func (ch *connectChain) failed() error {
	h := ch.current
	ch.current = nil
	reached, refused := ch.reached, ch.refused
	ch.reached, ch.refused = false, false
	if refused {
		// CheckRole recorded the role: the host is not chosen again while
		// it has it, and a wrong role costs no attempt.
		return nil
	}
	return ch.walk.Failed(h, &ConnectError{Addr: h.Addr, Reached: reached})
}

// isSocket reports whether v is dialled on a unix socket.
func isSocket(v *pgconn.FallbackConfig) bool {
	network, _ := pgconn.NetworkAddress(v.Host, v.Port)
	return network == "unix"
}

// markPrefix starts the mark lookupFunc gives an entry's addresses, in the
// place of an IPv6 zone: 127.0.0.1%pgfailover-3.
const markPrefix = "%pgfailover-"

// markAddr marks a resolved address (an IP address, or host:port) with
// entry i.
func markAddr(a string, i int) string {
	if host, port, err := net.SplitHostPort(a); err == nil {
		return net.JoinHostPort(host+markPrefix+strconv.Itoa(i), port)
	}
	return a + markPrefix + strconv.Itoa(i)
}

// unmarkAddr takes the mark off a dial's host:port, returning the address
// to dial and the entry, or ok false for an address without a mark.
func unmarkAddr(addr string) (real string, i int, ok bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	at := strings.LastIndex(host, markPrefix)
	if at < 0 {
		return "", 0, false
	}
	i, err = strconv.Atoi(host[at+len(markPrefix):])
	if err != nil || i < 0 {
		return "", 0, false
	}
	return net.JoinHostPort(host[:at], port), i, true
}

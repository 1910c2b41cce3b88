package metricsrv

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit bounds the endpoint's connections without letting idle ones
// starve a scrape: at most max open at once and perClient from one remote
// address. A connection that would go over either bound closes the
// oldest idle connection in its way (one that has sent no request yet, or
// a keep-alive one between requests: of the same address when that is the
// bound reached); when none is idle (all are inside a request, each
// bounded by the server's timeouts) the newcomer is closed at once. So a
// client holding connections open without asking anything delays nobody,
// and a client in the middle of many requests uses its own share only.
type connLimit struct {
	net.Listener
	max, perClient int

	mu     sync.Mutex
	conns  map[net.Conn]*tracked // by the accepted (TCP) connection
	byAddr map[string]int
}

// tracked is one open connection: its remote address and since when it
// is idle (zero while inside a request).
type tracked struct {
	addr      string
	idleSince time.Time
}

func newConnLimit(ln net.Listener, max, perClient int) *connLimit {
	return &connLimit{Listener: ln, max: max, perClient: perClient,
		conns: map[net.Conn]*tracked{}, byAddr: map[string]int{}}
}

// Accept returns the next connection within the bounds, closing those
// over them.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.admit(c) {
			return c, nil
		}
		c.Close()
	}
}

// admit counts c in, making room by closing idle connections; false when
// there is no room.
func (l *connLimit) admit(c net.Conn) bool {
	addr := remoteHost(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[addr] >= l.perClient && !l.evict(addr) {
		return false
	}
	if len(l.conns) >= l.max && !l.evict("") {
		return false
	}
	l.conns[c] = &tracked{addr: addr, idleSince: time.Now()}
	l.byAddr[addr]++
	return true
}

// evict closes the oldest idle connection (of addr, or of any address when
// addr is ""); false when there is none. Called with mu held.
func (l *connLimit) evict(addr string) bool {
	var oldest net.Conn
	var since time.Time
	for c, t := range l.conns {
		if t.idleSince.IsZero() || (addr != "" && t.addr != addr) {
			continue
		}
		if oldest == nil || t.idleSince.Before(since) {
			oldest, since = c, t.idleSince
		}
	}
	if oldest == nil {
		return false
	}
	oldest.Close()
	l.forget(oldest)
	return true
}

// forget stops counting c. Called with mu held.
func (l *connLimit) forget(c net.Conn) {
	t, ok := l.conns[c]
	if !ok {
		return
	}
	delete(l.conns, c)
	if l.byAddr[t.addr]--; l.byAddr[t.addr] <= 0 {
		delete(l.byAddr, t.addr)
	}
}

// connState follows the server's connections (http.Server.ConnState):
// inside a request, idle, or gone.
func (l *connLimit) connState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.conns[c]
	switch {
	case s == http.StateClosed || s == http.StateHijacked:
		l.forget(c)
	case !ok:
	case s == http.StateActive:
		t.idleSince = time.Time{}
	case s == http.StateIdle:
		t.idleSince = time.Now()
	}
}

// remoteHost is c's remote IP address (the port left out: one client's
// connections come from many ports).
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}

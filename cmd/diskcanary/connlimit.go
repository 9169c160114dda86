package main

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// connLimiter caps the daemon's open connections, and so its file
// descriptors. When full it does not refuse the newcomer (an idle flood
// would then lock every scraper out): it closes the connection that has
// waited longest outside a handler, that is an idle keep-alive, a TLS
// handshake, a request still arriving, or one basic auth turned away. A
// connection is kept only while a handler serves it, which --web.max-requests
// and the write timeout bound; when every connection is in a handler, the
// newcomer is closed.
type connLimiter struct {
	max     int
	mu      sync.Mutex
	open    int
	waiting list.List // of *limitedConn outside a handler, oldest first
}

type limitedConn struct {
	net.Conn
	limiter  *connLimiter
	handlers int           // under limiter.mu, as are the two below
	waiting  *list.Element // in limiter.waiting; nil while in a handler or closed
	closed   bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.limiter.release(c)
	return err
}

type limitedListener struct {
	net.Listener
	limiter *connLimiter
}

// listen opens every address, sharing one cap.
func (l *connLimiter) listen(addrs []string) ([]net.Listener, error) {
	var ls []net.Listener
	for _, a := range addrs {
		nl, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range ls {
				_ = l.Close()
			}
			return nil, fmt.Errorf("--web.listen-address: %w", err)
		}
		ls = append(ls, limitedListener{nl, l})
	}
	return ls, nil
}

func (ll limitedListener) Accept() (net.Conn, error) {
	for {
		nc, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &limitedConn{Conn: nc, limiter: ll.limiter}
		victim := ll.limiter.admit(c)
		if victim != nil {
			_ = victim.Close()
		}
		if victim != c {
			return c, nil
		}
	}
}

// admit counts c in and returns the connection to close when that makes
// one too many: the longest waiting, c itself if all others are busy.
func (l *connLimiter) admit(c *limitedConn) *limitedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open++
	c.waiting = l.waiting.PushBack(c)
	if l.open <= l.max {
		return nil
	}
	return l.waiting.Front().Value.(*limitedConn)
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	l.open--
	if c.waiting != nil {
		l.waiting.Remove(c.waiting)
		c.waiting = nil
	}
}

// track marks a connection busy while a handler serves one of its
// requests, and waiting again, as the newest, after.
func (l *connLimiter) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := r.Context().Value(connKey{}).(*limitedConn)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		l.mu.Lock()
		c.handlers++
		if c.waiting != nil {
			l.waiting.Remove(c.waiting)
			c.waiting = nil
		}
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			c.handlers--
			if c.handlers == 0 && !c.closed {
				c.waiting = l.waiting.PushBack(c)
			}
			l.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

type connKey struct{}

// connContext lets track find the limitedConn under a TLS connection.
func (l *connLimiter) connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

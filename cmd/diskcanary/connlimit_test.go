package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The connection cap closes the connection that has waited longest outside
// a handler, never one a handler is serving; with every connection busy it
// closes the newcomer.
func TestConnLimiterEvictsLongestWaiting(t *testing.T) {
	l := &connLimiter{max: 2}
	conn := func() *limitedConn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return &limitedConn{Conn: a, limiter: l}
	}
	inHandler := func(c *limitedConn, during func()) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req = req.WithContext(l.connContext(req.Context(), c))
		l.track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { during() })).ServeHTTP(httptest.NewRecorder(), req)
	}
	a, b, c, d := conn(), conn(), conn(), conn()
	require.Nil(t, l.admit(a))
	require.Nil(t, l.admit(b))
	// a served a request after b arrived: b has waited longest now.
	inHandler(a, func() {})
	require.Same(t, b, l.admit(c))
	require.NoError(t, b.Close())
	_ = b.Close() // the server closes it again: counted once
	require.Equal(t, 2, l.open)
	inHandler(a, func() {
		inHandler(c, func() {
			require.Same(t, d, l.admit(d), "every connection busy: the newcomer goes")
		})
	})
	require.NoError(t, d.Close())
	require.Equal(t, 2, l.open)
	require.NoError(t, a.Close())
	require.NoError(t, c.Close())
	require.Equal(t, 0, l.open)
	require.Equal(t, 0, l.waiting.Len())
}

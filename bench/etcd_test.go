package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bpftrace's lines: the etcd's syncs on its WAL are etcd's, its other
// syncs (the db's) are left out, every other process's are the source's.
func TestParseSyncs(t *testing.T) {
	etcd, src := parseSyncs([]byte("Attaching 4 probes...\nS 10 300 250 7\nS 10 100 240 7\nS 10 200 900 9\nS 22 150 400 3\n"), 10, 7)
	require.Equal(t, []tsync{{100, 240}, {300, 250}}, etcd)
	require.Equal(t, []tsync{{150, 400}}, src)
}

// Each burst's priming op (the first, and the first after an interval's
// pause) is not one the probe times.
func TestTimedOps(t *testing.T) {
	ms := int64(time.Millisecond)
	syncs := []tsync{{0, ms}, {11 * ms, ms}, {22 * ms, ms}, {1022 * ms, ms}, {1033 * ms, ms}}
	require.Equal(t, []tsync{{11 * ms, ms}, {22 * ms, ms}, {1033 * ms, ms}}, timedOps(syncs, 100*time.Millisecond))
}

// etcd's syncs in the source's minutes, and the same in adjacent windows
// taken in turn by A and B.
func TestSameMinutes(t *testing.T) {
	s := int64(time.Second)
	src := []tsync{{10 * s, 1000}, {40 * s, 1000}}
	etcd := []tsync{{5 * s, 1}, {12 * s, 2}, {21 * s, 3}, {25 * s, 4}, {33 * s, 5}, {40 * s, 6}, {41 * s, 7}}
	all, a, b := sameMinutes(etcd, src, 10*time.Second)
	require.Equal(t, []time.Duration{2, 3, 4, 5, 6}, all)
	require.Equal(t, []time.Duration{2, 5}, a)    // [10,20) and [30,40) s
	require.Equal(t, []time.Duration{3, 4, 6}, b) // [20,30) and [40,50) s
}

package kmsg

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A sequenced-packet socket keeps record boundaries as /dev/kmsg does (one
// record per read), so the reader's sequence logic can be fed by hand:
// a gap is records the kernel overwrote, an older record is one seen.
func TestReaderCountsGapsAndSkipsSeenRecords(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	require.NoError(t, err)
	w := os.NewFile(uintptr(fds[1]), "writer")
	defer w.Close()
	r := &Reader{f: os.NewFile(uintptr(fds[0]), "kmsg"), buf: make([]byte, 16<<10)}
	defer r.Close()
	for _, rec := range []string{
		"6,10,1,-;first\n",
		"6,15,2,-;after a gap of four\n",
		"6,12,3,-;older: already past\n",
		"not a record\n",
		"6,16,4,-;next\n",
	} {
		_, err := w.Write([]byte(rec))
		require.NoError(t, err)
	}
	var got []string
	for range 3 {
		rec, err := r.Next()
		require.NoError(t, err)
		got = append(got, rec.Text)
	}
	require.Equal(t, []string{"first", "after a gap of four", "next"}, got)
	require.Equal(t, uint64(4), r.Lost())
}

package collector

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// parseDiskstats keeps procfs's reading of /proc/diskstats: 14, 18 and 20
// fields counted, a shorter line left out, fields past 20 ignored.
func TestParseDiskstats(t *testing.T) {
	stats, err := parseDiskstats([]byte("   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n" +
		"259 0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 99 98\n" +
		"7 0 loop0 1 2\n" +
		"253 1 dm-1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"))
	require.NoError(t, err)
	require.Len(t, stats, 3)
	require.Equal(t, "sda", stats[0].DeviceName)
	require.Equal(t, uint32(8), stats[0].MajorNumber)
	require.Equal(t, 14, stats[0].IoStatsCount)
	require.Equal(t, uint64(11), stats[0].WeightedIOTicks)
	require.Equal(t, uint32(259), stats[1].MajorNumber)
	require.Equal(t, 20, stats[1].IoStatsCount)
	require.Equal(t, uint64(17), stats[1].TimeSpentFlushing)
	require.Equal(t, "dm-1", stats[2].DeviceName)
	require.Equal(t, 18, stats[2].IoStatsCount)
	require.Equal(t, uint64(15), stats[2].DiscardTicks)
}

func TestParseDiskstatsRefusesANonNumber(t *testing.T) {
	_, err := parseDiskstats([]byte("8 0 sda 1 2 x 4 5 6 7 8 9 10 11\n"))
	require.EqualError(t, err, `line 1, field 6: "x" is not a counter`)
}

package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDiskstatsDefaultFilter(t *testing.T) {
	c, err := Parse(nil)
	require.NoError(t, err)
	inc, exc, err := c.Diskstats.DeviceFilter()
	require.NoError(t, err)
	require.Nil(t, inc)
	for name, excluded := range map[string]bool{
		"sda": false, "sda1": true, "vda": false, "vda2": true, "xvdb3": true,
		"nvme0n1": false, "nvme0n1p1": true, "mmcblk0": false, "mmcblk0p2": true,
		"loop0": false, "loop12": false, "dm-0": false, "md127": false,
		"ram0": true, "zram0": true, "fd0": true, "sdaa": false, "sdaa9": true,
	} {
		require.Equal(t, excluded, exc.MatchString(name), name)
	}
}

func TestDiskstatsIncludeReplacesDefault(t *testing.T) {
	c, err := Parse([]byte("diskstats:\n  device_include: '^loop'\n"))
	require.NoError(t, err)
	inc, exc, err := c.Diskstats.DeviceFilter()
	require.NoError(t, err)
	require.Nil(t, exc)
	require.True(t, inc.MatchString("loop3"))
	require.False(t, inc.MatchString("sda"))

	_, err = Parse([]byte("diskstats:\n  device_include: a\n  device_exclude: b\n"))
	require.ErrorContains(t, err, "mutually exclusive")
	_, err = Parse([]byte("diskstats:\n  device_exclude: '('\n"))
	require.ErrorContains(t, err, "diskstats.device_exclude")
}

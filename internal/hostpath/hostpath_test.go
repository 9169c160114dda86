package hostpath

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestZeroValueIsTheHost(t *testing.T) {
	var p Paths
	require.Equal(t, "/proc", p.Proc())
	require.Equal(t, "/proc/self/mountinfo", p.Proc("self", "mountinfo"))
	require.Equal(t, "/sys", p.Sys())
	require.Equal(t, "/sys/class/block/sda", p.Sys("class/block", "sda"))
}

func TestOverride(t *testing.T) {
	p := Paths{ProcFS: "/host/proc/", SysFS: "testdata/sys"}
	require.Equal(t, "/host/proc", p.Proc())
	require.Equal(t, "/host/proc/diskstats", p.Proc("diskstats"))
	require.Equal(t, "testdata/sys/block", p.Sys("block"))
}

func TestFlags(t *testing.T) {
	var p Paths
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	p.AddFlags(fs)
	require.Equal(t, "/proc", fs.Lookup("path.procfs").DefValue)
	require.Equal(t, "/sys", fs.Lookup("path.sysfs").DefValue)
	require.Equal(t, Paths{ProcFS: "/proc", SysFS: "/sys"}, p, "the defaults are set before parsing")

	require.NoError(t, fs.Parse([]string{"--path.procfs", "/host/proc", "--path.sysfs=/host/sys"}))
	require.Equal(t, "/host/proc/self/status", p.Proc("self/status"))
	require.Equal(t, "/host/sys/dev/block", p.Sys("dev/block"))
}

package guest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The archive the kernel unpacks: a 110-byte header per entry, the name
// with its NUL padded to 4 bytes, the data padded to 4 bytes, then the
// trailer entry.
func TestInitramfsIsNewcCpio(t *testing.T) {
	r := &Initramfs{entries: map[string]*cpioEntry{}}
	r.File("/a", []byte("hi"), 0o644)
	var b bytes.Buffer
	require.NoError(t, r.write(&b))
	want := "070701" + "00000001" + "000081A4" + "00000000" + "00000000" + "00000001" + "00000000" + "00000002" +
		"00000000" + "00000000" + "00000000" + "00000000" + "00000002" + "00000000" + "a\x00" + "hi\x00\x00" +
		"070701" + "00000000" + "00000000" + "00000000" + "00000000" + "00000001" + "00000000" + "00000000" +
		"00000000" + "00000000" + "00000000" + "00000000" + "0000000B" + "00000000" + "TRAILER!!!\x00" + "\x00\x00\x00"
	require.Equal(t, want, b.String())
	require.Equal(t, 240, b.Len())
}

func TestInitramfsAddsParentDirectories(t *testing.T) {
	r := NewInitramfs()
	r.File("/usr/share/x/y.conf", nil, 0o600)
	for _, dir := range []string{"usr", "usr/share", "usr/share/x"} {
		require.Equal(t, uint32(modeDir|0o755), r.entries[dir].mode, dir)
	}
	require.Equal(t, uint32(modeRegular|0o600), r.entries["usr/share/x/y.conf"].mode)
	require.Equal(t, uint32(modeCharDev|0o600), r.entries["dev/console"].mode)
	require.Equal(t, [2]uint32{5, 1}, [2]uint32{r.entries["dev/console"].rmajor, r.entries["dev/console"].rmin})
}

func TestLddPaths(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007ffd4c9e5000)
	libselinux.so.1 => /lib/x86_64-linux-gnu/libselinux.so.1 (0x00007f703a98b000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f703a41e000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f703aacb000)
`
	paths, err := lddPaths(out)
	require.NoError(t, err)
	require.Equal(t, []string{"/lib/x86_64-linux-gnu/libselinux.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}, paths)

	_, err = lddPaths("\tlibfoo.so.1 => not found\n")
	require.ErrorContains(t, err, "libfoo.so.1 => not found")
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"nvme-core":                               "nvme_core",
		"nvme_core":                               "nvme_core",
		"kernel/drivers/nvme/host/nvme-core.ko":   "nvme_core",
		"kernel/drivers/ata/libata.ko.xz":         "libata",
		"kernel/drivers/scsi/sd_mod.ko\n":         "sd_mod",
		strings.Repeat(" ", 2) + "crc64-rocksoft": "crc64_rocksoft",
	} {
		require.Equal(t, want, moduleName(in), in)
	}
}

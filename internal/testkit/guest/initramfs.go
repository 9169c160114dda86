package guest

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// Initramfs is the guest's root filesystem, written as the uncompressed
// "newc" cpio archive the kernel unpacks into its rootfs.
type Initramfs struct {
	entries map[string]*cpioEntry
}

type cpioEntry struct {
	mode         uint32 // file type and permissions, as in stat(2)
	data         []byte // a regular file's content, a symlink's target
	rmajor, rmin uint32 // a device node's number
}

// cpio mode bits (sys/stat.h); the kernel's unpacker reads these.
const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeCharDev = 0o020000
)

// NewInitramfs starts a root filesystem with the usual directories and
// /dev/console, which the kernel opens for init before devtmpfs exists.
func NewInitramfs() *Initramfs {
	r := &Initramfs{entries: map[string]*cpioEntry{}}
	for _, d := range []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/lib", "/lib64", "/etc",
		"/proc", "/sys", "/dev", "/tmp", "/run", "/var/lib"} {
		r.Dir(d)
	}
	r.entries["dev/console"] = &cpioEntry{mode: modeCharDev | 0o600, rmajor: 5, rmin: 1}
	return r
}

func clean(name string) string { return strings.TrimPrefix(path.Clean("/"+name), "/") }

// Dir adds a directory and its parents.
func (r *Initramfs) Dir(name string) {
	for n := clean(name); n != "" && n != "."; n = path.Dir(n) {
		if _, ok := r.entries[n]; !ok {
			r.entries[n] = &cpioEntry{mode: modeDir | 0o755}
		}
	}
}

// File adds a regular file with the given content and permissions.
func (r *Initramfs) File(name string, data []byte, perm os.FileMode) {
	n := clean(name)
	r.Dir(path.Dir(n))
	r.entries[n] = &cpioEntry{mode: modeRegular | uint32(perm.Perm()), data: data}
}

// Copy adds the host file src (symlinks followed) as name, with its
// permissions.
func (r *Initramfs) Copy(tb testkit.TB, name, src string) {
	tb.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		tb.Fatalf("initramfs: %v", err)
	}
	st, err := os.Stat(src)
	if err != nil {
		tb.Fatalf("initramfs: %v", err)
	}
	r.File(name, data, st.Mode())
}

// Program adds the host executable src as name, and, when it is
// dynamically linked, its ELF interpreter and the shared libraries
// ldd(1) resolves for it, at their host paths.
func (r *Initramfs) Program(tb testkit.TB, name, src string) {
	tb.Helper()
	r.Copy(tb, name, src)
	static, err := isStatic(src)
	if err != nil {
		tb.Fatalf("initramfs: %v", err)
	}
	if static {
		return
	}
	out, err := exec.Command("ldd", src).Output()
	if err != nil {
		tb.Fatalf("initramfs: ldd %s: %v", src, err)
	}
	libs, err := lddPaths(string(out))
	if err != nil {
		tb.Fatalf("initramfs: ldd %s: %v", src, err)
	}
	for _, lib := range libs {
		r.Copy(tb, lib, lib)
	}
}

// isStatic reports whether an ELF executable has no interpreter.
func isStatic(file string) (bool, error) {
	f, err := elf.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// lddPaths reads the absolute paths out of ldd(1) output: lines
// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the
// interpreter's "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vDSO has none.
func lddPaths(out string) ([]string, error) {
	var paths []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("missing library: %s", line)
		}
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		if p, _, _ := strings.Cut(line, " "); strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("no libraries in its output")
	}
	return paths, nil
}

// WriteFile writes the archive.
func (r *Initramfs) WriteFile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = r.write(w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// write emits the entries in path order (a directory before what is in
// it) and the trailer. newc format: a 110-byte ASCII header of 13 8-digit
// hex fields after the magic, the NUL-terminated name, padding to 4 bytes,
// the data, padding to 4 bytes.
func (r *Initramfs) write(w io.Writer) error {
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var off int64
	emit := func(ino int, name string, e *cpioEntry) error {
		nlink := 1
		if e.mode&0o170000 == modeDir {
			nlink = 2
		}
		hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, e.rmajor, e.rmin, len(name)+1, 0)
		for _, b := range [][]byte{[]byte(hdr), []byte(name), {0}, pad(off + int64(len(hdr)+len(name)+1)), e.data} {
			if _, err := w.Write(b); err != nil {
				return err
			}
			off += int64(len(b))
		}
		_, err := w.Write(pad(off))
		off += int64(len(pad(off)))
		return err
	}
	for i, n := range names {
		if err := emit(i+1, n, r.entries[n]); err != nil {
			return err
		}
	}
	return emit(0, "TRAILER!!!", &cpioEntry{})
}

func pad(off int64) []byte { return make([]byte, (4-off%4)%4) }

// modulesDir is where the guest finds the kernel modules it loads.
const modulesDir = "/lib/modules"

// addInit adds the modules and /init: mount the kernel filesystems, load
// the modules in order, bring up loopback, then serve the command channel
// on ttyS1 (see Guest.Run) until the host hangs up.
func (r *Initramfs) addInit(tb testkit.TB, modules []string) {
	tb.Helper()
	var names []string
	for _, m := range modules {
		base := filepath.Base(m)
		r.Copy(tb, path.Join(modulesDir, base), m)
		names = append(names, base)
	}
	r.File("/init", []byte(fmt.Sprintf(initScript, modulesDir, strings.Join(names, " "))), 0o755)
}

// initScript runs as PID 1. Modules load before busybox installs its
// applets, so a request_module() from the kernel finds no modprobe and
// fails at once. Each command runs in a subshell (an exit there must not
// end PID 1) with stderr on the console, and is followed by a line
// "@@done STATUS" after a newline of its own, so output that lacks a final
// newline still ends before the marker.
const initScript = `#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
for m in %[2]s; do
	/bin/busybox insmod %[1]s/$m || echo "guest: insmod $m failed" >/dev/console
done
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t tmpfs tmpfs /tmp
ip link set lo up
stty raw -echo </dev/ttyS1
exec </dev/ttyS1 >/dev/ttyS1 2>/dev/console
echo @@ready
while IFS= read -r line; do
	(eval "$line") </dev/null
	printf '\n@@done %%d\n' "$?"
done
poweroff -f
`

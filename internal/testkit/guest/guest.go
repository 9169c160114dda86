package guest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// Config is one guest.
type Config struct {
	Kernel Kernel
	// Modules are module files to load at boot, in order (Kernel.ModuleFiles).
	Modules []string
	// Root holds what the test puts in the guest; Boot adds busybox, the
	// modules and /init.
	Root *Initramfs
	// QEMUArgs are appended to the machine's: the devices under test.
	QEMUArgs []string
	// BootTimeout bounds boot until the command channel answers.
	BootTimeout time.Duration
}

// QEMU returns the qemu-system-x86_64 binary, or skips the test (also
// when the end-to-end tests are off: testkit.E2E).
func QEMU(tb testkit.TB) string {
	tb.Helper()
	testkit.E2E(tb)
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		tb.Skip("skipping: needs qemu-system-x86_64 (apt-get install --no-install-recommends qemu-system-x86)")
	}
	return bin
}

// Busybox returns a statically linked busybox, or skips the test.
func Busybox(tb testkit.TB) string {
	tb.Helper()
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if static, err := isStatic(p); err == nil && static {
			return p
		}
	}
	tb.Skip("skipping: needs a statically linked busybox (apt-get install busybox-static)")
	return ""
}

// Guest is a running QEMU guest.
type Guest struct {
	// Console is the file that takes the guest's ttyS0: the kernel log and
	// the stderr of every command.
	Console string
	ctl     net.Conn
	ctlIn   *bufio.Reader
	qmp     net.Conn
	qmpIn   *json.Decoder
	process *testkit.Process
}

// Boot starts the guest under TCG on a q35 machine (whose ICH9 AHCI
// controller is buses ide.0 to ide.5) with one vCPU, and waits until its
// command channel answers. It is stopped at cleanup.
func Boot(tb testkit.TB, cfg Config) *Guest {
	tb.Helper()
	qemu := QEMU(tb)
	cfg.Root.Program(tb, "/bin/busybox", Busybox(tb))
	cfg.Root.addInit(tb, cfg.Modules)
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = 90 * time.Second
	}

	// Unix socket paths are limited to 108 bytes; t.TempDir() may be longer.
	dir, err := os.MkdirTemp("", "guest-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := cfg.Root.WriteFile(initrd); err != nil {
		tb.Fatalf("initramfs: %v", err)
	}
	g := &Guest{Console: filepath.Join(dir, "console.log")}
	// QEMU connects to the test's sockets, so nothing the guest writes
	// can be lost to a connection not yet made.
	ctlL := listenUnix(tb, filepath.Join(dir, "ctl.sock"))
	qmpL := listenUnix(tb, filepath.Join(dir, "qmp.sock"))

	args := []string{
		"-machine", "q35", "-accel", "tcg", "-smp", "1", "-m", "512",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", cfg.Kernel.Image, "-initrd", initrd,
		// panic=-1 with -no-reboot: a guest panic ends QEMU at once.
		"-append", "console=ttyS0 panic=-1 quiet",
		"-chardev", "file,id=console,path=" + g.Console, "-device", "isa-serial,chardev=console",
		"-chardev", "socket,id=ctl,path=" + filepath.Join(dir, "ctl.sock"), "-device", "isa-serial,chardev=ctl",
		"-chardev", "socket,id=qmp,path=" + filepath.Join(dir, "qmp.sock"), "-mon", "chardev=qmp,mode=control",
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("guest console (%s):\n%s", g.Console, tail(g.Console, 16<<10))
		}
	})
	g.process = testkit.StartProcess(tb, qemu, append(args, cfg.QEMUArgs...)...)
	g.ctl = accept(tb, g, ctlL)
	g.ctlIn = bufio.NewReader(g.ctl)
	g.qmp = accept(tb, g, qmpL)
	g.qmpIn = json.NewDecoder(g.qmp)
	tb.Cleanup(func() { g.ctl.Close(); g.qmp.Close() })

	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	_ = g.qmp.SetDeadline(time.Now().Add(30 * time.Second))
	if err := g.qmpIn.Decode(&greeting); err != nil || greeting.QMP == nil {
		tb.Fatalf("qmp: no greeting: %v", err)
	}
	if _, err := g.QMP("qmp_capabilities", nil); err != nil {
		tb.Fatalf("qmp: %v", err)
	}

	_ = g.ctl.SetReadDeadline(time.Now().Add(cfg.BootTimeout))
	for {
		line, err := g.ctlIn.ReadString('\n')
		if err != nil {
			tb.Fatalf("guest did not come up within %v: %v", cfg.BootTimeout, g.exited(err))
		}
		if line == "@@ready\n" {
			return g
		}
	}
}

func listenUnix(tb testkit.TB, path string) *net.UnixListener {
	tb.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// accept takes QEMU's connection; QEMU makes it while it starts.
func accept(tb testkit.TB, g *Guest, l *net.UnixListener) net.Conn {
	tb.Helper()
	_ = l.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := l.Accept()
	if err != nil {
		tb.Fatalf("qemu did not connect to %s: %v", l.Addr(), g.exited(err))
	}
	return c
}

// exited adds QEMU's own output to err when QEMU has ended.
func (g *Guest) exited(err error) error {
	select {
	case <-g.process.Done:
		return fmt.Errorf("%w; qemu exited (%v):\n%s", err, g.process.Cmd.ProcessState, tail(g.process.Log, 4<<10))
	case <-time.After(2 * time.Second):
		return err
	}
}

// Run runs a shell command line in the guest (as root, in a subshell of
// init) and returns its standard output and exit status; its standard
// error goes to the console. The test fails if the command does not end
// within timeout.
func (g *Guest) Run(tb testkit.TB, cmd string, timeout time.Duration) (stdout string, status int) {
	tb.Helper()
	if strings.ContainsAny(cmd, "\n\r") {
		tb.Fatalf("guest command %q: one line only", cmd)
	}
	_ = g.ctl.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(g.ctl, "%s\n", cmd); err != nil {
		tb.Fatalf("guest command %q: %v", cmd, g.exited(err))
	}
	var out strings.Builder
	for {
		line, err := g.ctlIn.ReadString('\n')
		if err != nil {
			tb.Fatalf("guest command %q did not finish within %v: %v; its output so far:\n%s", cmd, timeout, g.exited(err), out.String())
		}
		if rest, ok := strings.CutPrefix(line, "@@done "); ok {
			status, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				tb.Fatalf("guest command %q: bad end marker %q", cmd, line)
			}
			// The marker's own leading newline.
			return strings.TrimSuffix(out.String(), "\n"), status
		}
		out.WriteString(line)
	}
}

// QMP runs a QEMU monitor command and returns its result; events that
// arrive meanwhile are skipped.
func (g *Guest) QMP(command string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	_ = g.qmp.SetDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(g.qmp).Encode(req); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", command, err)
	}
	for {
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class, Desc string
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := g.qmpIn.Decode(&resp); err != nil {
			return nil, fmt.Errorf("qmp %s: %w", command, err)
		}
		switch {
		case resp.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s: %s", command, resp.Error.Class, resp.Error.Desc)
		case resp.Event != "":
			continue
		case resp.Return == nil:
			return nil, errors.New("qmp " + command + ": a reply with neither return nor error")
		}
		return resp.Return, nil
	}
}

// QOMSet sets a property of a QEMU object, such as a device given an id
// on the command line (/machine/peripheral/ID).
func (g *Guest) QOMSet(tb testkit.TB, path, property string, value any) {
	tb.Helper()
	if _, err := g.QMP("qom-set", map[string]any{"path": path, "property": property, "value": value}); err != nil {
		tb.Fatal(err)
	}
}

// QOMGet reads a property of a QEMU object.
func (g *Guest) QOMGet(tb testkit.TB, path, property string) json.RawMessage {
	tb.Helper()
	v, err := g.QMP("qom-get", map[string]any{"path": path, "property": property})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = append([]byte("..."), b[len(b)-n:]...)
	}
	return string(b)
}

package testfs

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Main is the test filesystem's process: mount, print "ready", serve the
// control socket until SIGTERM/SIGINT, release held ops, unmount.
// cmd/diskcanary-testfs and test binaries re-executed by Start both run it.
func Main(args []string) int {
	fl := flag.NewFlagSet(Name, flag.ContinueOnError)
	backing := fl.String("backing", "", "backing directory (use a tmpfs with --fake-sync for pure injected latency)")
	mountpoint := fl.String("mountpoint", "", "where to mount")
	control := fl.String("control", "", "unix socket for control commands (sync-delay, read-delay, sync-error, io-error, refuse-odirect, hang, hang-reads, release, stats)")
	syncDelay := fl.Duration("sync-delay", 0, "latency added to every fsync/fdatasync")
	readDelay := fl.Duration("read-delay", 0, "latency added to every read")
	fakeSync := fl.Bool("fake-sync", false, "answer flushes without flushing the backing directory")
	allowOther := fl.Bool("allow-other", false, "let other users use the mount")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *backing == "" || *mountpoint == "" {
		fmt.Fprintln(os.Stderr, "diskcanary-testfs: --backing and --mountpoint are required")
		return 2
	}
	server, faults, err := Mount(*backing, *mountpoint, Options{FakeSync: *fakeSync, AllowOther: *allowOther})
	if err != nil {
		fmt.Fprintf(os.Stderr, "diskcanary-testfs: mount %s: %v\n", *mountpoint, err)
		return 1
	}
	faults.SetSyncDelay(*syncDelay)
	faults.SetReadDelay(*readDelay)
	if *control != "" {
		ln, err := net.Listen("unix", *control)
		if err != nil {
			fmt.Fprintf(os.Stderr, "diskcanary-testfs: control socket: %v\n", err)
			_ = server.Unmount()
			return 1
		}
		defer ln.Close()
		go serveControl(ln, faults)
	}
	fmt.Println("ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	faults.Release()
	// A client may still hold a file open; retry briefly, then detach
	// lazily so the test machine never keeps a dead mount.
	for i := 0; i < 20; i++ {
		if err = server.Unmount(); err == nil {
			return 0
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Unmount(*mountpoint, syscall.MNT_DETACH)
	return 0
}

func serveControl(ln net.Listener, f *Faults) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				reply := command(f, sc.Text())
				fmt.Fprintln(conn, reply)
			}
		}()
	}
}

// command applies one control line and returns the reply.
func command(f *Faults, line string) string {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "error: empty command"
	}
	arg := ""
	if len(fields) > 1 {
		arg = fields[1]
	}
	switch fields[0] {
	case "sync-delay", "read-delay":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return "error: " + err.Error()
		}
		if fields[0] == "sync-delay" {
			f.SetSyncDelay(d)
		} else {
			f.SetReadDelay(d)
		}
	case "sync-error", "io-error":
		errno, ok := map[string]syscall.Errno{"EIO": syscall.EIO, "ENOSPC": syscall.ENOSPC, "none": 0, "": 0}[arg]
		if !ok {
			return "error: unknown errno " + arg
		}
		if fields[0] == "sync-error" {
			f.SetSyncError(errno)
		} else {
			f.SetIOError(errno)
		}
	case "refuse-odirect":
		f.RefuseDirect(arg != "off")
	case "hang":
		f.Hang(false)
	case "hang-reads":
		f.Hang(true)
	case "release":
		f.Release()
	case "stats":
		return fmt.Sprintf("ok syncs=%d blocked=%d", f.Syncs(), f.Blocked())
	default:
		return "error: unknown command " + fields[0]
	}
	return "ok"
}

// Control is a client of a running test filesystem's control socket.
type Control struct {
	conn net.Conn
	r    *bufio.Reader
}

// Dial connects to a control socket.
func Dial(path string) (*Control, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return &Control{conn: conn, r: bufio.NewReader(conn)}, nil
}

// Do sends one command and returns the reply after "ok".
func (c *Control) Do(cmd string) (string, error) {
	if _, err := fmt.Fprintln(c.conn, cmd); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "ok") {
		return "", errors.New(line)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "ok")), nil
}

// Stats returns the number of flushes answered and ops held right now.
func (c *Control) Stats() (syncs, blocked int64, err error) {
	s, err := c.Do("stats")
	if err != nil {
		return 0, 0, err
	}
	_, err = fmt.Sscanf(s, "syncs=%d blocked=%d", &syncs, &blocked)
	return syncs, blocked, err
}

// Close closes the connection.
func (c *Control) Close() error { return c.conn.Close() }

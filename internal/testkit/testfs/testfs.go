// Package testfs is diskcanary's slow and broken disk: a FUSE loopback
// filesystem over a backing directory that injects latency and faults into
// fsync/fdatasync and reads. Tests and bench/ scripts use it for ground
// truth (d ms injected per fdatasync must show up as d ms in the probe) and
// for failures real disks produce only when they are dying: EIO on flush,
// EIO on every read and write (a loop device over it logs real block-layer
// errors), a flush or read that never returns until released.
//
// It runs as its own process (Serve, or cmd/diskcanary-testfs) because a
// FUSE server must never share a process with a client that can block on
// it: a stop-the-world pause in the client process would wait for a
// syscall that the stopped server is supposed to answer.
package testfs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Name is the FUSE subtype: the mount shows as fstype "fuse.diskcanary-testfs".
const Name = "diskcanary-testfs"

// Faults is the injection state shared by every node of one mount.
type Faults struct {
	mu        sync.Mutex
	syncDelay time.Duration
	syncErr   syscall.Errno
	ioErr     syscall.Errno // reads and writes fail with it
	readDelay time.Duration
	// hold, when non-nil, blocks flushes (and reads if holdReads) until
	// it is closed by Release.
	hold      chan struct{}
	holdReads bool
	// refuseDirect fails O_DIRECT opens with EINVAL, as filesystems
	// without direct I/O support do.
	refuseDirect bool

	syncs   atomic.Int64 // flushes answered (after any delay)
	blocked atomic.Int64 // ops waiting on hold right now
}

// SetSyncDelay adds d to every fsync/fdatasync.
func (f *Faults) SetSyncDelay(d time.Duration) { f.mu.Lock(); f.syncDelay = d; f.mu.Unlock() }

// SetReadDelay adds d to every read.
func (f *Faults) SetReadDelay(d time.Duration) { f.mu.Lock(); f.readDelay = d; f.mu.Unlock() }

// SetSyncError makes every flush fail with errno (0 clears it) without
// reaching the backing file, like a disk whose cache flush fails.
func (f *Faults) SetSyncError(errno syscall.Errno) { f.mu.Lock(); f.syncErr = errno; f.mu.Unlock() }

// SetIOError makes every read and write fail with errno (0 clears it),
// like a disk with unreadable and unwritable sectors.
func (f *Faults) SetIOError(errno syscall.Errno) { f.mu.Lock(); f.ioErr = errno; f.mu.Unlock() }

func (f *Faults) ioError() syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ioErr
}

// RefuseDirect makes O_DIRECT opens fail with EINVAL (or succeed again).
func (f *Faults) RefuseDirect(on bool) { f.mu.Lock(); f.refuseDirect = on; f.mu.Unlock() }

func (f *Faults) directRefused(flags uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refuseDirect && flags&syscall.O_DIRECT != 0
}

// Hang makes every following flush (and read, if reads) block until Release.
func (f *Faults) Hang(reads bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hold == nil {
		f.hold = make(chan struct{})
	}
	f.holdReads = reads
}

// Release lets every held op continue and stops holding new ones.
func (f *Faults) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hold != nil {
		close(f.hold)
		f.hold = nil
	}
}

// Syncs is how many flushes have been answered.
func (f *Faults) Syncs() int64 { return f.syncs.Load() }

// Blocked is how many ops are held right now.
func (f *Faults) Blocked() int64 { return f.blocked.Load() }

func (f *Faults) beforeSync(ctx context.Context) syscall.Errno {
	f.mu.Lock()
	delay, errno, hold := f.syncDelay, f.syncErr, f.hold
	f.mu.Unlock()
	if hold != nil {
		f.wait(ctx, hold)
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	return errno
}

func (f *Faults) beforeRead(ctx context.Context) {
	f.mu.Lock()
	delay, hold := f.readDelay, f.hold
	if !f.holdReads {
		hold = nil
	}
	f.mu.Unlock()
	if hold != nil {
		f.wait(ctx, hold)
	}
	if delay > 0 {
		time.Sleep(delay)
	}
}

// wait blocks until released. A held op ignores interrupts on purpose: a
// disk in D state does not answer signals either.
func (f *Faults) wait(_ context.Context, hold chan struct{}) {
	f.blocked.Add(1)
	<-hold
	f.blocked.Add(-1)
}

// node is a loopback node whose flush and read pass through the faults.
// The bridge asks the node before the file handle, so overriding them here
// covers every open file.
type node struct {
	*fs.LoopbackNode
	faults *Faults
	// fakeSync answers flushes without flushing the backing file, so a
	// tmpfs backing directory costs nothing and d is the whole latency.
	fakeSync bool
}

var (
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeFsyncer     = (*node)(nil)
	_ fs.NodeReader      = (*node)(nil)
	_ fs.NodeWrapChilder = (*node)(nil)
)

// Open and Create hand out files the kernel cannot bypass: with FUSE
// passthrough (Linux 6.9+, used by go-fuse's loopback when root), reads and
// writes would go straight to the backing file and skip the faults.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.faults.directRefused(flags) {
		return nil, 0, syscall.EINVAL
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return noPassthrough(fh), fl, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.faults.directRefused(flags) {
		return nil, nil, 0, syscall.EINVAL
	}
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, noPassthrough(fh), fl, errno
}

type noPassthroughFile struct{ *fs.LoopbackFile }

func (noPassthroughFile) PassthroughFd() (int, bool) { return 0, false }

func noPassthrough(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return noPassthroughFile{lf}
	}
	return fh
}

func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), faults: n.faults, fakeSync: n.fakeSync}
}

func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if errno := n.faults.beforeSync(ctx); errno != 0 {
		return errno
	}
	defer n.faults.syncs.Add(1)
	if n.fakeSync {
		return 0
	}
	if s, ok := fh.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	return syscall.ENOTSUP
}

func (n *node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.faults.beforeRead(ctx)
	if errno := n.faults.ioError(); errno != 0 {
		return nil, errno
	}
	if r, ok := fh.(fs.FileReader); ok {
		return r.Read(ctx, dest, off)
	}
	return nil, syscall.ENOTSUP
}

func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := n.faults.ioError(); errno != 0 {
		return 0, errno
	}
	if w, ok := fh.(fs.FileWriter); ok {
		return w.Write(ctx, data, off)
	}
	return 0, syscall.ENOTSUP
}

// Options configure a mount.
type Options struct {
	// FakeSync answers flushes without flushing the backing directory.
	FakeSync bool
	// AllowOther lets other users (the permission tests' nobody) in.
	AllowOther bool
}

// Mount serves backing at mountpoint and returns the server and its faults.
// Unmount with server.Unmount after releasing held ops.
func Mount(backing, mountpoint string, o Options) (*fuse.Server, *Faults, error) {
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, nil, err
	}
	faults := &Faults{}
	wrapped := &node{LoopbackNode: root.(*fs.LoopbackNode), faults: faults, fakeSync: o.FakeSync}
	// The loopback root must know its own wrapper, or lookups from the
	// root would hand out unwrapped children.
	wrapped.LoopbackNode.RootData.RootNode = wrapped
	zero := time.Duration(0)
	server, err := fs.Mount(mountpoint, wrapped, &fs.Options{
		// No attribute or entry caching: every op reaches the server, so
		// what a test injects is what the client sees.
		AttrTimeout:  &zero,
		EntryTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:      backing,
			Name:        Name,
			DirectMount: true,
			AllowOther:  o.AllowOther,
			// The kernel's default of one background request keeps flushes
			// from overlapping; more threads keep a held op from blocking
			// the others.
			MaxBackground: 16,
			// Direct I/O submitted through AIO (the capacity sweep's, fio's
			// libaio) is served asynchronously, as on a disk and as libfuse
			// negotiates by default; without it each io_submit waits for
			// its read, and the reads go one at a time.
			ExtraCapabilities: fuse.CAP_ASYNC_DIO,
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return server, faults, nil
}

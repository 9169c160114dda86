// Command diskcanary-testfs mounts diskcanary's latency- and fault-injecting
// FUSE test filesystem, for bench/ scripts that run fio and diskcanary on
// the same slow disk. Example:
//
//	diskcanary-testfs --backing /dev/shm/b --mountpoint /mnt/slow --fake-sync --sync-delay 2ms
package main

import (
	"os"

	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

func main() { os.Exit(testfs.Main(os.Args[1:])) }

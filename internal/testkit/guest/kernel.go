// Package guest boots a small Linux guest under QEMU, in software
// emulation (TCG), for end-to-end tests on emulated hardware: a Debian
// kernel image, an initramfs the test builds (busybox and the programs
// under test) and a command channel on the guest's second serial port.
// What QEMU emulates (NVMe and AHCI controllers, their SMART data) is
// driven through QMP while the guest runs. Tests skip, saying what to
// install, where QEMU, a static busybox or a kernel is missing.
package guest

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// KernelEnv names a directory laid out like an extracted Debian
// linux-image package: boot/vmlinuz-RELEASE and lib/modules/RELEASE.
const KernelEnv = "DISKCANARY_GUEST_KERNEL"

// DefaultKernelDir is where .ci/run extracts the kernel package
// (`apt-get download` + `dpkg-deb -x`, never installed on the host, so no
// initramfs or bootloader hook runs).
const DefaultKernelDir = "/var/cache/diskcanary/guest-kernel"

// Kernel is a bootable kernel image with its modules.
type Kernel struct {
	Release string // 6.1.0-56-amd64
	Image   string // .../boot/vmlinuz-RELEASE
	Modules string // .../lib/modules/RELEASE
}

// FindKernel returns the kernel in $DISKCANARY_GUEST_KERNEL, else in
// DefaultKernelDir, else the host's own (/boot and /lib/modules, when
// both are readable), the newest release of the first root that has one.
// It skips the test when there is none.
func FindKernel(tb testkit.TB) Kernel {
	tb.Helper()
	if dir := os.Getenv(KernelEnv); dir != "" {
		k, ok := kernelIn(dir)
		if !ok {
			tb.Fatalf("%s=%s: no boot/vmlinuz-RELEASE with a readable lib/modules/RELEASE/kernel there", KernelEnv, dir)
		}
		return k
	}
	for _, dir := range []string{DefaultKernelDir, "/"} {
		if k, ok := kernelIn(dir); ok {
			return k
		}
	}
	tb.Skipf("skipping: no guest kernel: set %s to a directory holding boot/vmlinuz-RELEASE and lib/modules/RELEASE, "+
		"e.g. `apt-get download linux-image-6.1.0-NN-amd64 && dpkg-deb -x linux-image-*.deb DIR` (.ci/run does this into %s)",
		KernelEnv, DefaultKernelDir)
	return Kernel{}
}

func kernelIn(root string) (Kernel, bool) {
	images, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	sort.Sort(sort.Reverse(sort.StringSlice(images)))
	for _, img := range images {
		rel := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		k := Kernel{Release: rel, Image: img, Modules: filepath.Join(root, "lib", "modules", rel)}
		f, err := os.Open(img) // Ubuntu keeps vmlinuz readable by root only
		if err != nil {
			continue
		}
		f.Close()
		if st, err := os.Stat(filepath.Join(k.Modules, "kernel")); err == nil && st.IsDir() {
			return k, true
		}
	}
	return Kernel{}, false
}

// ModuleFiles returns the module files the guest must load, in an order
// that loads each after the modules it depends on, for the named modules
// and everything they depend on. Modules built into the kernel (its
// modules.builtin) are left out. Dependencies are read from each module's
// own .modinfo section: a kernel package that was never installed has no
// modules.dep (depmod runs in its postinst).
func (k Kernel) ModuleFiles(tb testkit.TB, names ...string) []string {
	tb.Helper()
	builtin := map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(k.Modules, "modules.builtin")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			builtin[moduleName(sc.Text())] = true
		}
	}
	files := map[string]string{}
	var compressed []string
	err := filepath.WalkDir(filepath.Join(k.Modules, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch base := d.Name(); {
		case strings.HasSuffix(base, ".ko"):
			files[moduleName(base)] = path
		case strings.Contains(base, ".ko."):
			compressed = append(compressed, path)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("kernel %s: modules: %v", k.Release, err)
	}
	var order []string
	done := map[string]bool{}
	var visit func(name, neededBy string)
	visit = func(name, neededBy string) {
		n := moduleName(name)
		if builtin[n] || done[n] {
			return
		}
		done[n] = true
		path, ok := files[n]
		if !ok {
			if len(compressed) > 0 {
				tb.Skipf("skipping: kernel %s has compressed modules (%s); the guest's busybox insmod needs plain .ko files", k.Release, filepath.Base(compressed[0]))
			}
			tb.Fatalf("kernel %s: module %s (needed by %s) is neither built in nor in %s", k.Release, name, neededBy, k.Modules)
		}
		deps, err := moduleDepends(path)
		if err != nil {
			tb.Fatalf("kernel %s: %v", k.Release, err)
		}
		for _, d := range deps {
			visit(d, name)
		}
		order = append(order, path)
	}
	for _, name := range names {
		visit(name, "the test")
	}
	return order
}

// moduleName is a module's name as the kernel compares it: "nvme-core",
// "nvme_core" and "kernel/drivers/nvme/host/nvme-core.ko" are one module.
func moduleName(s string) string {
	s = strings.TrimSpace(filepath.Base(s))
	if i := strings.Index(s, ".ko"); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "-", "_")
}

// moduleDepends reads the depends= entry of a module's .modinfo section
// (NUL-separated key=value strings, what modinfo(8) prints).
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: .modinfo: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

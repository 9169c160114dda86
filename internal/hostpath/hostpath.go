// Package hostpath owns where diskcanary reads the host's kernel files: the
// procfs and sysfs mountpoints, set by --path.procfs and --path.sysfs (in a
// container, the host's /proc and /sys mounted elsewhere). Every reader of
// /proc or /sys takes a Paths from its caller instead of naming them itself,
// so an override reaches all of them and the defaults are stated here only.
package hostpath

import "path/filepath"

// The mountpoints on a host, and so the flags' defaults.
const (
	DefaultProcFS = "/proc"
	DefaultSysFS  = "/sys"
)

// Paths are the host's procfs and sysfs mountpoints. An empty field means
// the default, so the zero value reads the host diskcanary runs on; read
// them through Proc and Sys, which apply that.
type Paths struct {
	ProcFS, SysFS string
}

// Proc returns elem joined under the procfs mountpoint; with no elem, the
// mountpoint itself.
func (p Paths) Proc(elem ...string) string {
	return join(p.ProcFS, DefaultProcFS, elem)
}

// Sys returns elem joined under the sysfs mountpoint; with no elem, the
// mountpoint itself.
func (p Paths) Sys(elem ...string) string {
	return join(p.SysFS, DefaultSysFS, elem)
}

func join(root, def string, elem []string) string {
	if root == "" {
		root = def
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// FlagSet is the part of a flag set AddFlags needs: the standard library's
// *flag.FlagSet and cobra's *pflag.FlagSet both have it.
type FlagSet interface {
	StringVar(p *string, name, value, usage string)
}

// AddFlags binds --path.procfs and --path.sysfs to p: every command that
// reads the host takes the same two flags, with the same defaults and help.
func (p *Paths) AddFlags(fs FlagSet) {
	fs.StringVar(&p.ProcFS, "path.procfs", DefaultProcFS, "procfs mountpoint (the host's /proc in a container)")
	fs.StringVar(&p.SysFS, "path.sysfs", DefaultSysFS, "sysfs mountpoint (the host's /sys in a container)")
}

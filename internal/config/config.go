// Package config owns diskcanary's configuration: the YAML file format, the
// embedded default, strict decoding with line numbers, defaults and
// validation. Flags are bound in cmd/diskcanary and applied on top.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Default is the embedded configuration `diskcanary serve` runs with when no
// --config.file is given.
//
//go:embed default.yml
var Default []byte

// Config is the whole configuration file.
type Config struct {
	Probes    Probes    `yaml:"probes"`
	Diskstats Diskstats `yaml:"diskstats"`
	Smart     Smart     `yaml:"smart"`

	// Host paths come from --path.procfs / --path.sysfs, never from the file.
	ProcFS string `yaml:"-"`
	SysFS  string `yaml:"-"`
}

// Probes is the canary probe section.
type Probes struct {
	Enabled bool    `yaml:"enabled"`
	Targets []Probe `yaml:"targets"`
}

// Probe kinds.
const (
	KindWAL      = "wal"      // etcd WAL pattern: sequential small writes, fdatasync after each
	KindRandRead = "randread" // O_DIRECT random reads over a pre-written working set or a block device
)

// WAL layouts.
const (
	LayoutFresh     = "fresh"     // a new fallocated file per cycle: what etcd and first-run fio see
	LayoutOverwrite = "overwrite" // re-use a fully written file: ~40 % faster, labelled as such
)

// Probe is one canary probe on one directory (or, for randread, one block device).
type Probe struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
	// Dir is where probe files live. Required for wal; for randread it holds
	// the working-set file unless Device is set.
	Dir string `yaml:"dir"`
	// Device is a block device read with O_DIRECT, opened read-only (randread only).
	Device string `yaml:"device"`

	Interval time.Duration `yaml:"interval"`
	// Jitter spreads cycles by ±Jitter×Interval so a fleet does not sync up.
	Jitter float64 `yaml:"jitter"`
	// Ops is the number of timed operations per cycle (fdatasyncs or reads).
	Ops       int      `yaml:"ops"`
	BlockSize ByteSize `yaml:"block_size"`
	Layout    string   `yaml:"layout"`
	// WorkingSet is the size of the pre-written read file (randread).
	WorkingSet ByteSize `yaml:"working_set"`
	// StallThreshold: an op in flight for longer sets diskcanary_probe_stalled.
	StallThreshold time.Duration `yaml:"stall_threshold"`
	// MinFree is the free-space floor the probe refuses to cross.
	MinFree ByteSize `yaml:"min_free"`
	// DailyWriteBudget caps the bytes WAL probes dirty per 24 h on the
	// probe's filesystem. WAL probes on one filesystem share one budget:
	// the smallest of theirs. Read probes do not spend it.
	DailyWriteBudget ByteSize `yaml:"daily_write_budget"`

	// Line is where the probe starts in the config file, for error messages.
	Line int `yaml:"-"`
}

// Probe defaults. 50 fdatasyncs every 44 s is 1,022 samples per 15 minutes;
// at the ~14 KB of physical writes per sample measured on ext4 (data pages
// plus the journal commit each fdatasync of a fresh fallocated file needs)
// that is 1.41 GB/day. See README "Write budget".
const (
	DefaultWALInterval      = 44 * time.Second
	DefaultWALOps           = 50
	MaxWALBurst             = 50
	DefaultWALBlockSize     = 2300
	DefaultReadInterval     = 30 * time.Second
	DefaultReadOps          = 100
	DefaultReadBlockSize    = 4096
	DefaultWorkingSet       = 1 << 30
	DefaultJitter           = 0.1
	DefaultStallThreshold   = 5 * time.Second
	DefaultMinFree          = 1 << 30
	DefaultDailyWriteBudget = 1_500_000_000
)

// Load reads and validates a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly (unknown keys are errors), applies defaults and validates.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	c := &Config{}
	c.setDefaults()
	if root.Kind != 0 {
		strict := yaml.NewDecoder(bytes.NewReader(data))
		strict.KnownFields(true)
		if err := strict.Decode(c); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		recordProbeLines(&root, c)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) setDefaults() {
	c.Probes.Enabled = true
	c.Diskstats.setDefaults()
	c.Smart.setDefaults()
}

// recordProbeLines remembers where each probe starts so validation errors can name the line.
func recordProbeLines(root *yaml.Node, c *Config) {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	probes := mappingValue(doc, "probes")
	targets := mappingValue(probes, "targets")
	if targets == nil || targets.Kind != yaml.SequenceNode {
		return
	}
	for i, n := range targets.Content {
		if i < len(c.Probes.Targets) {
			c.Probes.Targets[i].Line = n.Line
		}
	}
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// ApplyProbeDefaults fills unset probe fields from the kind's defaults.
func (p *Probe) ApplyProbeDefaults() {
	if p.Jitter == 0 {
		p.Jitter = DefaultJitter
	}
	if p.StallThreshold == 0 {
		p.StallThreshold = DefaultStallThreshold
	}
	if p.MinFree == 0 {
		p.MinFree = DefaultMinFree
	}
	if p.DailyWriteBudget == 0 {
		p.DailyWriteBudget = DefaultDailyWriteBudget
	}
	switch p.Kind {
	case KindWAL:
		if p.Interval == 0 {
			p.Interval = DefaultWALInterval
		}
		if p.Ops == 0 {
			p.Ops = DefaultWALOps
		}
		if p.BlockSize == 0 {
			p.BlockSize = DefaultWALBlockSize
		}
		if p.Layout == "" {
			p.Layout = LayoutFresh
		}
	case KindRandRead:
		if p.Interval == 0 {
			p.Interval = DefaultReadInterval
		}
		if p.Ops == 0 {
			p.Ops = DefaultReadOps
		}
		if p.BlockSize == 0 {
			p.BlockSize = DefaultReadBlockSize
		}
		if p.WorkingSet == 0 && p.Device == "" {
			p.WorkingSet = DefaultWorkingSet
		}
	}
}

// Validate applies per-probe defaults and checks every section.
func (c *Config) Validate() error {
	names := map[string]bool{}
	for i := range c.Probes.Targets {
		p := &c.Probes.Targets[i]
		p.ApplyProbeDefaults()
		if err := p.validate(); err != nil {
			return p.errorf("%v", err)
		}
		if names[p.Name] {
			return p.errorf("probes.targets[].name: duplicate probe name %q", p.Name)
		}
		names[p.Name] = true
	}
	if err := c.Diskstats.validate(); err != nil {
		return err
	}
	return c.Smart.validate()
}

func (p *Probe) errorf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if p.Line > 0 {
		return fmt.Errorf("line %d: probe %q: %s", p.Line, p.Name, msg)
	}
	return fmt.Errorf("probe %q: %s", p.Name, msg)
}

func (p *Probe) validate() error {
	if p.Name == "" {
		return errors.New("probes.targets[].name: required")
	}
	switch p.Kind {
	case KindWAL:
		if p.Dir == "" {
			return errors.New("probes.targets[].dir: required for kind wal")
		}
		if p.Device != "" {
			return errors.New("probes.targets[].device: a wal probe never writes to a block device; set dir instead")
		}
		if p.Ops > MaxWALBurst {
			return fmt.Errorf("probes.targets[].ops: %d fdatasyncs per cycle exceeds the burst limit of %d", p.Ops, MaxWALBurst)
		}
		if p.Layout != LayoutFresh && p.Layout != LayoutOverwrite {
			return fmt.Errorf("probes.targets[].layout: %q is not one of fresh, overwrite", p.Layout)
		}
	case KindRandRead:
		if (p.Dir == "") == (p.Device == "") {
			return errors.New("probes.targets[]: a randread probe needs exactly one of dir or device")
		}
		if p.Layout != "" {
			return errors.New("probes.targets[].layout: only wal probes have a layout")
		}
		if p.BlockSize%512 != 0 {
			return fmt.Errorf("probes.targets[].block_size: %d is not a multiple of 512, which O_DIRECT needs", p.BlockSize)
		}
		if p.Device == "" && p.WorkingSet < 2*p.BlockSize {
			return fmt.Errorf("probes.targets[].working_set: %d bytes is too small", p.WorkingSet)
		}
	case "":
		return errors.New("probes.targets[].kind: required (wal or randread)")
	default:
		return fmt.Errorf("probes.targets[].kind: %q is not one of wal, randread", p.Kind)
	}
	if p.Interval < 0 || p.Ops < 0 || p.BlockSize < 0 {
		return errors.New("probes.targets[]: interval, ops and block_size must be positive")
	}
	if p.Jitter < 0 || p.Jitter >= 1 {
		return fmt.Errorf("probes.targets[].jitter: %v must be in [0, 1)", p.Jitter)
	}
	return nil
}

// ByteSize is a size in bytes, written in YAML as a number or with a unit
// (KiB, MiB, GiB, TiB, kB, MB, GB, TB).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseByteSize parses "2300", "4KiB", "1.5GB".
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			mult = u.mult
			s = strings.TrimSpace(strings.TrimSuffix(s, u.suffix))
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 4096, 4KiB, 1GiB, 1.5GB)", s)
	}
	return ByteSize(f * float64(mult)), nil
}

// UnmarshalYAML accepts a plain number of bytes or a number with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// DefaultProbes is the default probe set (one wal, one randread) on each of
// dirs, as --probe.dir asks. With one directory the probes are named "wal"
// and "randread" on every node, so fleet rules can compare like with like;
// with several, the directory's base name is appended.
func DefaultProbes(dirs []string) []Probe {
	var out []Probe
	seen := map[string]int{}
	for _, dir := range dirs {
		suffix := ""
		if len(dirs) > 1 {
			base := strings.Trim(strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
					return r
				}
				return '_'
			}, filepathBase(dir)), "_")
			if base == "" {
				base = "root"
			}
			seen[base]++
			if n := seen[base]; n > 1 {
				base = fmt.Sprintf("%s%d", base, n)
			}
			suffix = "-" + base
		}
		out = append(out,
			Probe{Name: KindWAL + suffix, Kind: KindWAL, Dir: dir},
			Probe{Name: KindRandRead + suffix, Kind: KindRandRead, Dir: dir})
	}
	return out
}

func filepathBase(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

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
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/diskcanary/diskcanary/internal/regfile"
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

	// src is where each key is in the file ("probes.targets[1].ops"), so
	// Validate can name the line.
	src map[string]*yaml.Node
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
	KindCapacity = "capacity" // a latency-bounded capacity sweep, on a long schedule; never in the defaults
)

// A capacity probe's patterns: what `check --profile capacity --pattern`
// offers, one per probe.
const (
	CapacityRandRead  = "randread"  // 4 KiB O_DIRECT random reads over a pre-written working set
	CapacityRandWrite = "randwrite" // 4 KiB O_DIRECT random writes into that working set
	CapacityWAL       = "wal"       // etcd's WAL appends, an fdatasync after each, one writer
)

// CapacityPatterns are the patterns, the default first.
var CapacityPatterns = []string{CapacityRandRead, CapacityRandWrite, CapacityWAL}

// WAL layouts.
const (
	LayoutAppend    = "append"    // appends into a preallocated segment, a new one when full: what etcd does
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
	// Gap is the pause between one WAL op's end and the next one's start
	// (fio's thinktime): etcd's appends come with gaps, and an fdatasync
	// after a gap costs more than one issued back to back. 0 is fio's
	// back-to-back recipe. nil until defaults are applied.
	Gap *time.Duration `yaml:"gap"`
	// SegmentSize is the append layout's preallocated file, cut anew when
	// full, as etcd's WAL segments.
	SegmentSize ByteSize `yaml:"segment_size"`
	// WorkingSet is the size of the pre-written read file (randread).
	WorkingSet ByteSize `yaml:"working_set"`
	// StallThreshold: an op in flight for longer sets diskcanary_probe_stalled.
	StallThreshold time.Duration `yaml:"stall_threshold"`
	// MinFree is the free-space floor the probe refuses to cross.
	MinFree ByteSize `yaml:"min_free"`
	// EtcdDataDir is the etcd data directory a WAL probe stands in for
	// (wal only, optional): the probe exports the device under it
	// (diskcanary_probe_etcd_data_dir_info), so a canary measuring another
	// disk than etcd's is alerted on, not trusted.
	EtcdDataDir string `yaml:"etcd_data_dir"`
	// DailyWriteBudget caps the bytes WAL probes dirty per 24 h on the
	// probe's filesystem. WAL probes on one filesystem share one budget:
	// the smallest of theirs. Read probes do not spend it.
	DailyWriteBudget ByteSize `yaml:"daily_write_budget"`

	// Pattern, MaxP99, Rates and WriteBudget are a capacity probe's sweep,
	// as check --profile capacity's flags of the same names: the I/O, the
	// p99 bound, the IOPS asked of each step (nil: the daemon's default
	// list) and the most one sweep may write.
	Pattern     string        `yaml:"pattern"`
	MaxP99      time.Duration `yaml:"max_p99"`
	Rates       []float64     `yaml:"rates"`
	WriteBudget ByteSize      `yaml:"write_budget"`

	// Line is where the probe starts in the config file, for error messages.
	Line int `yaml:"-"`
}

// Probe defaults. SamplesPer gives the samples they yield per window;
// the WAL probe's bytes per day are probes.WALWriteCost's.
const (
	DefaultWALInterval      = 44 * time.Second
	DefaultWALOps           = 50
	MaxWALBurst             = 50
	DefaultWALBlockSize     = 2300
	DefaultWALGap           = 10 * time.Millisecond
	DefaultSegmentSize      = 64_000_000 // etcd's wal.SegmentSizeBytes
	DefaultReadInterval     = 30 * time.Second
	DefaultReadOps          = 100
	DefaultReadBlockSize    = 4096
	DefaultWorkingSet       = 1 << 30
	DefaultJitter           = 0.1
	DefaultStallThreshold   = 5 * time.Second
	DefaultMinFree          = 1 << 30
	DefaultDailyWriteBudget = 1_500_000_000
	// A capacity sweep is load on a production disk: once a day by
	// default, bounded by its p99 bound and by a write budget of its own.
	DefaultCapacityInterval    = 24 * time.Hour
	DefaultCapacityMaxP99      = 10 * time.Millisecond
	DefaultCapacityWriteBudget = 256 << 20
	// MaxCapacityRate bounds a step's rate, so its samples (16 bytes each)
	// take at most 16 MB; MaxCapacitySteps bounds a rate list.
	MaxCapacityRate  = 1_000_000
	MaxCapacitySteps = 100
)

// SamplesPer is the timed ops the probe yields per window on average: each
// WAL burst starts with one untimed op, every read is timed. A 15-minute
// p99 needs 1,000 (docs/contract.md, measurement rule 1).
func (p Probe) SamplesPer(window time.Duration) float64 {
	timed := p.Ops
	if p.Kind == KindWAL {
		timed--
	}
	return window.Seconds() / p.Interval.Seconds() * float64(timed)
}

// Load reads and validates a configuration file.
func Load(path string) (*Config, error) {
	// A FIFO or device is refused at once: opening a FIFO would block
	// serve and --config.check for ever, silently.
	data, err := regfile.Read(path, MaxConfigBytes)
	if errors.Is(err, regfile.ErrTooLarge) {
		return nil, fmt.Errorf("config %s: %w", path, errTooLarge)
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

var errTooLarge = fmt.Errorf("larger than %d bytes; a diskcanary config is a few kilobytes", MaxConfigBytes)

// Parse decodes YAML strictly (unknown keys are errors), applies defaults and validates.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, errTooLarge
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	c := &Config{src: map[string]*yaml.Node{}}
	c.setDefaults()
	if root.Kind != 0 {
		if err := c.readKeys(&root); err != nil {
			return nil, err
		}
		strict := yaml.NewDecoder(bytes.NewReader(data))
		strict.KnownFields(true)
		if err := strict.Decode(c); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if targets := c.src["probes.targets"]; targets != nil {
			for i, n := range targets.Content {
				if i < len(c.Probes.Targets) {
					c.Probes.Targets[i].Line = n.Line
				}
			}
		}
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

// readKeys reads the text of every key of every section with its kind, so a
// value its Go type cannot hold is refused with key and line before the
// decoder wraps or rejects it anonymously, and remembers where each key is.
func (c *Config) readKeys(root *yaml.Node) error {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if n := lookup(lookup(doc, "probes"), "targets"); n != nil && n.Kind == yaml.SequenceNode {
		c.src["probes.targets"] = n
		for i, item := range n.Content {
			if err := readKeys(probeKeys, item, fmt.Sprintf("probes.targets[%d]", i), c.src); err != nil {
				return err
			}
		}
	}
	if err := readKeys(diskstatsKeys, lookup(doc, "diskstats"), "diskstats", c.src); err != nil {
		return err
	}
	smart := lookup(doc, "smart")
	if err := readKeys(smartKeys, smart, "smart", c.src); err != nil {
		return err
	}
	selfTests := lookup(smart, "self_tests")
	if err := readKeys(selfTestKeys, selfTests, "smart.self_tests", c.src); err != nil {
		return err
	}
	for _, class := range SelfTestClasses {
		if err := readKeys(selfTestClassKeys, lookup(selfTests, class), "smart.self_tests."+class, c.src); err != nil {
			return err
		}
	}
	if n := lookup(smart, "devices"); n != nil && n.Kind == yaml.SequenceNode {
		c.src["smart.devices"] = n
		for i, item := range n.Content {
			path := fmt.Sprintf("smart.devices[%d]", i)
			c.src[path] = item
			if err := readKeys(smartDeviceKeys, item, path, c.src); err != nil {
				return err
			}
		}
	}
	return nil
}

// lineOf is the line of path in the file, 0 if it is not there.
func (c *Config) lineOf(path string) int {
	if n := c.src[path]; n != nil {
		return n.Line
	}
	return 0
}

// at prefixes an error with its line when it has one.
func at(line int, format string, args ...any) error {
	if line > 0 {
		return fmt.Errorf("line %d: "+format, append([]any{line}, args...)...)
	}
	return fmt.Errorf(format, args...)
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
			p.Layout = LayoutAppend
		}
		if p.Gap == nil {
			gap := time.Duration(DefaultWALGap)
			p.Gap = &gap
		}
		if p.SegmentSize == 0 {
			p.SegmentSize = DefaultSegmentSize
		}
	case KindCapacity:
		if p.Interval == 0 {
			p.Interval = DefaultCapacityInterval
		}
		if p.Pattern == "" {
			p.Pattern = CapacityRandRead
		}
		if p.MaxP99 == 0 {
			p.MaxP99 = DefaultCapacityMaxP99
		}
		if p.WriteBudget == 0 {
			p.WriteBudget = DefaultCapacityWriteBudget
		}
		if p.BlockSize == 0 {
			p.BlockSize = DefaultReadBlockSize
			if p.Pattern == CapacityWAL {
				p.BlockSize = DefaultWALBlockSize
			}
		}
		if p.WorkingSet == 0 && p.Pattern != CapacityWAL {
			p.WorkingSet = DefaultWorkingSet
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

// probeKeys bounds every probe key. Minimums keep a probe from becoming a
// busy loop (interval: 1ns ran 1.5 M cycles in 6 s at 100 % CPU) and
// maximums keep every product the probes compute (interval × (1+jitter),
// ops × block_size, free space − need) far inside an int64. 10ms is below
// the 20-50 ms the end-to-end tests probe at and far above a busy loop.
var probeKeys = []key[Probe]{
	field("name", func(p *Probe) *string { return &p.Name }, text, probeName),
	field("kind", func(p *Probe) *string { return &p.Kind }, text, oneOf(KindWAL, KindRandRead, KindCapacity)),
	field("dir", func(p *Probe) *string { return &p.Dir }, text, optional(absPath)),
	field("device", func(p *Probe) *string { return &p.Device }, text, optional(absPath)),
	field("etcd_data_dir", func(p *Probe) *string { return &p.EtcdDataDir }, text, optional(absPath)),
	field("interval", func(p *Probe) *time.Duration { return &p.Interval }, duration, within(10*time.Millisecond, 24*time.Hour)),
	field("jitter", func(p *Probe) *float64 { return &p.Jitter }, ratio, fraction),
	field("ops", func(p *Probe) *int { return unlessCapacity(p, &p.Ops) }, count, within(1, 10_000)),
	field("block_size", func(p *Probe) *ByteSize { return &p.BlockSize }, size, within[ByteSize](1, MaxBlockSize)),
	field("layout", func(p *Probe) *string { return &p.Layout }, text, optional(oneOf(LayoutAppend, LayoutOverwrite))),
	// A pause between timed ops: more than a second is no longer a WAL burst.
	field("gap", func(p *Probe) *time.Duration { return p.Gap }, duration, within(0, time.Second)),
	field("segment_size", func(p *Probe) *ByteSize { return &p.SegmentSize }, size, within[ByteSize](0, 1<<30)),
	field("working_set", func(p *Probe) *ByteSize { return &p.WorkingSet }, size, within[ByteSize](0, 1<<40)),
	field("stall_threshold", func(p *Probe) *time.Duration { return &p.StallThreshold }, duration, within(10*time.Millisecond, time.Hour)),
	field("min_free", func(p *Probe) *ByteSize { return &p.MinFree }, size, within[ByteSize](1, 1<<60)),
	field("daily_write_budget", func(p *Probe) *ByteSize { return &p.DailyWriteBudget }, size, within[ByteSize](1, 1<<60)),
	field("pattern", func(p *Probe) *string { return onlyCapacity(p, &p.Pattern) }, text, oneOf(CapacityPatterns...)),
	// A bound under 10µs is below what a syscall costs; over 10 s is no
	// latency a service waits for.
	field("max_p99", func(p *Probe) *time.Duration { return onlyCapacity(p, &p.MaxP99) }, duration, within(10*time.Microsecond, 10*time.Second)),
	capacityRates,
	field("write_budget", func(p *Probe) *ByteSize { return onlyCapacity(p, &p.WriteBudget) }, size, within[ByteSize](1, 1<<40)),
}

// onlyCapacity and unlessCapacity leave a key unchecked by its row where
// the kind has no such setting: validateProbe refuses it there by name.
func onlyCapacity[V any](p *Probe, v *V) *V {
	if p.Kind != KindCapacity {
		return nil
	}
	return v
}

func unlessCapacity[V any](p *Probe, v *V) *V {
	if p.Kind == KindCapacity {
		return nil
	}
	return v
}

// Validate applies per-probe defaults and checks every section.
func (c *Config) Validate() error {
	if n := len(c.Probes.Targets); n > MaxProbeTargets {
		return at(c.lineOf("probes.targets"), "probes.targets: %d targets exceed the limit of %d (each probe holds an OS thread for its life)", n, MaxProbeTargets)
	}
	names := map[string]bool{}
	for i := range c.Probes.Targets {
		p := &c.Probes.Targets[i]
		p.ApplyProbeDefaults()
		if err := c.validateProbe(i, p); err != nil {
			return err
		}
		if names[p.Name] {
			return p.refuse(c.lineOf(fmt.Sprintf("probes.targets[%d].name", i)), "probes.targets[%d].name: duplicate probe name %q", i, p.Name)
		}
		names[p.Name] = true
	}
	if err := c.Diskstats.validate(c.src); err != nil {
		return err
	}
	return c.Smart.validate(c.src)
}

// Errorf is an error about the probe that names it and, when it came from
// a file, its first line: probes.CheckHost's refusals read like the file's.
func (p *Probe) Errorf(format string, args ...any) error {
	return p.refuse(0, format, args...)
}

// refuse is Errorf naming line, or the probe's first line when line is 0.
func (p *Probe) refuse(line int, format string, args ...any) error {
	if line == 0 {
		line = p.Line
	}
	return at(line, "probe %q: %s", p.Name, fmt.Sprintf(format, args...))
}

func (c *Config) validateProbe(i int, p *Probe) error {
	path := fmt.Sprintf("probes.targets[%d]", i)
	// Probes made from flags (Line 0) replaced the file's, whose keys say
	// nothing about them.
	src := c.src
	if p.Line == 0 {
		src = nil
	}
	if key, line, problem := checkKeys(probeKeys, p, src, path); problem != "" {
		return p.refuse(line, "%s.%s: %s", path, key, problem)
	}
	refuse := func(key, format string, args ...any) error {
		line := 0
		if src != nil {
			line = c.lineOf(path + "." + key)
		}
		return p.refuse(line, "%s.%s: %s", path, key, fmt.Sprintf(format, args...))
	}
	switch p.Kind {
	case KindWAL:
		if p.Dir == "" {
			return refuse("dir", "required for kind wal")
		}
		if p.Device != "" {
			return refuse("device", "a wal probe never writes to a block device; set dir instead")
		}
		if p.Ops > MaxWALBurst {
			return refuse("ops", "%d fdatasyncs per cycle exceeds the burst limit of %d", p.Ops, MaxWALBurst)
		}
		if burst := ByteSize(p.Ops) * p.BlockSize; p.Layout == LayoutAppend && p.SegmentSize < burst {
			return refuse("segment_size", "%s does not hold one burst (ops × block_size = %d bytes)", showSize(p.SegmentSize), burst)
		}
	case KindCapacity:
		return c.validateCapacity(p, refuse, func(key string) bool { return src != nil && src[path+"."+key] != nil })
	case KindRandRead:
		if (p.Dir == "") == (p.Device == "") {
			return refuse("dir", "a randread probe needs exactly one of dir or device")
		}
		if p.Layout != "" {
			return refuse("layout", "only wal probes have a layout")
		}
		if p.Gap != nil {
			return refuse("gap", "only wal probes pause between ops")
		}
		if p.SegmentSize != 0 {
			return refuse("segment_size", "only wal probes have a segment")
		}
		if p.EtcdDataDir != "" {
			return refuse("etcd_data_dir", "only wal probes stand in for etcd's WAL")
		}
		if p.BlockSize%512 != 0 {
			return refuse("block_size", "%d is not a multiple of 512, which O_DIRECT needs", p.BlockSize)
		}
		if p.Device == "" && p.WorkingSet < 2*p.BlockSize {
			return refuse("working_set", "%d bytes is too small: it must hold 2 blocks of %d bytes", p.WorkingSet, p.BlockSize)
		}
	}
	if p.Kind != KindCapacity {
		for _, k := range []struct {
			key string
			set bool
		}{{"pattern", p.Pattern != ""}, {"max_p99", p.MaxP99 != 0}, {"rates", p.Rates != nil}, {"write_budget", p.WriteBudget != 0}} {
			if k.set {
				return refuse(k.key, "only capacity probes sweep")
			}
		}
	}
	return nil
}

// validateCapacity checks what a capacity probe's kind asks: a directory
// (it writes its own files), no burst settings, and a working set only for
// the patterns that read or write one. inFile says whether the file set a
// key whose default applies to every kind.
func (c *Config) validateCapacity(p *Probe, refuse func(key, format string, args ...any) error, inFile func(key string) bool) error {
	switch {
	case p.Dir == "":
		return refuse("dir", "required for kind capacity")
	case p.Device != "":
		return refuse("device", "a capacity probe sweeps a directory's files; set dir instead")
	case p.Ops != 0:
		return refuse("ops", "a capacity probe's steps set their own op counts (at least 1,000 each)")
	case p.Layout != "":
		return refuse("layout", "only wal probes have a layout")
	case p.Gap != nil:
		return refuse("gap", "a capacity probe's ops come at each step's rate")
	case p.SegmentSize != 0:
		return refuse("segment_size", "only wal probes have a segment")
	case p.EtcdDataDir != "":
		return refuse("etcd_data_dir", "only wal probes stand in for etcd's WAL")
	case inFile("daily_write_budget"):
		return refuse("daily_write_budget", "a capacity probe is bounded by write_budget, per sweep")
	}
	if p.Pattern == CapacityWAL {
		if p.WorkingSet != 0 {
			return refuse("working_set", "the wal pattern appends to a segment of its own")
		}
		return nil
	}
	if p.BlockSize%512 != 0 {
		return refuse("block_size", "%d is not a multiple of 512, which O_DIRECT needs", p.BlockSize)
	}
	if p.WorkingSet < 2*p.BlockSize {
		return refuse("working_set", "%d bytes is too small: it must hold 2 blocks of %d bytes", p.WorkingSet, p.BlockSize)
	}
	return nil
}

// ByteSize is a size in bytes, written in YAML as a number or with a unit
// (KiB, MiB, GiB, TiB, PiB, EiB, kB, MB, GB, TB, PB, EB).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50}, {"EiB", 1 << 60},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15}, {"EB", 1e18}, {"B", 1},
	// fio's spellings (its default kb_base=1024): 4k, 22m, 1G. No bare e
	// for exa: 1e3 is a number.
	{"k", 1 << 10}, {"K", 1 << 10}, {"m", 1 << 20}, {"M", 1 << 20}, {"g", 1 << 30}, {"G", 1 << 30},
	{"t", 1 << 40}, {"T", 1 << 40}, {"p", 1 << 50}, {"P", 1 << 50},
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

// DefaultProbes is default.yml's probe set on each of dirs, as --probe.dir
// asks. With one directory the probes keep default.yml's names on every
// node, so fleet rules compare like with like; with several, the
// directory's base name is appended.
func DefaultProbes(dirs []string) []Probe {
	var out []Probe
	used := map[string]bool{}
	for _, dir := range dirs {
		suffix := ""
		if len(dirs) > 1 {
			base := strings.Trim(strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
					return r
				}
				return '_'
			}, filepathBase(dir)), "_")
			// "randread-" + base + a counter stays within a probe name's 64 bytes.
			base = base[:min(len(base), 48)]
			if base == "" {
				base = "root"
			}
			name := base
			for n := 2; used[name]; n++ {
				name = fmt.Sprintf("%s%d", base, n)
			}
			used[name] = true
			suffix = "-" + name
		}
		for _, p := range defaultTargets() {
			p.Name += suffix
			p.Dir = dir
			out = append(out, p)
		}
	}
	return out
}

// defaultTargets are the probes of the embedded default.yml as written
// (no defaults applied, no line numbers).
var defaultTargets = sync.OnceValue(func() []Probe {
	var d struct {
		Probes Probes `yaml:"probes"`
	}
	if err := yaml.Unmarshal(Default, &d); err != nil {
		panic("config: the embedded default.yml: " + err.Error())
	}
	for i := range d.Probes.Targets {
		d.Probes.Targets[i].Line = 0
	}
	return d.Probes.Targets
})

func filepathBase(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

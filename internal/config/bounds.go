package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Validation is one mechanism: every key of every section is a row in its
// section's table (probeKeys, smartKeys, smartDeviceKeys, diskstatsKeys)
// naming the key, where its value lives, its kind and the rule its final
// value obeys. Parse reads each key's text with its kind before decoding,
// so a value the Go type cannot hold is refused with key, line and the
// user's text; Validate applies the rules after defaults and flags, so
// `serve` and `serve --config.check` refuse the same things. A bounded
// field is one row, e.g.
//
//	field("ops", func(p *Probe) *int { return &p.Ops }, count, within(1, 10_000)),

// Bounds that are not a single key's.
const (
	// MaxProbeTargets bounds probes.targets. Every probe holds one OS thread
	// for its life (its loop is locked to it), and a thread stuck in D state
	// on a hung disk is never given back, so the probes must leave most of
	// Go's 10,000-thread limit to the rest of the daemon. 128 is 64
	// directories with the default wal + randread pair: more disks than a
	// 60-bay storage server has.
	MaxProbeTargets = 128
	// MaxBlockSize bounds a probe's block_size and check's --block-size:
	// one aligned buffer of it lives for the probe's (or the run's) life.
	MaxBlockSize ByteSize = 1 << 20
	// MaxSmartDevices bounds smart.devices, and what the SMART runner reads
	// from a smartctl --scan-open (a device costs a goroutine, its state and
	// ~17 series, never a thread: smartctl runs are bounded by concurrency).
	MaxSmartDevices = 1024
	// MaxConfigBytes bounds the file itself, so Load never reads a hostile
	// file into memory; the largest sane config is a few kilobytes.
	MaxConfigBytes = 1 << 20
	// maxPath is PATH_MAX less the NUL: longer paths cannot be opened.
	maxPath = 4095
	// maxRegex bounds a device filter. Go regexps run in linear time; this
	// only keeps a pasted mistake from becoming a megabyte program.
	maxRegex = 1024
)

// A key is one row of a section's table (S is Probe, Smart, SmartDevice or
// Diskstats).
type key[S any] struct {
	name string
	// read checks the YAML text of the key.
	read func(n *yaml.Node) error
	// check applies the rule to the final value; n is the key's node in the
	// file, if any. It returns the line (0 when the value did not come from
	// the file) and what is wrong ("" if nothing).
	check func(s *S, n *yaml.Node) (line int, problem string)
}

// A kind is how one type of value is read from YAML and shown in errors.
type kind[V comparable] struct {
	read func(n *yaml.Node) (V, error)
	show func(V) string
	// echo: show the user's text rather than show(value) when the value
	// came from the file (numbers as written; strings are always quoted).
	echo bool
}

// A rule returns what is wrong with v ("" if nothing); text is v as the
// user wrote it (or as shown), show formats bounds.
type rule[V any] func(v V, text string, show func(V) string) string

// field makes a table row for the key name whose value *at(s) is of kind k.
// at may return nil for an unset pointer field (nothing to check).
func field[S any, V comparable](name string, at func(*S) *V, k kind[V], r rule[V]) key[S] {
	return key[S]{
		name: name,
		read: func(n *yaml.Node) error {
			if n.Kind != yaml.ScalarNode {
				return errors.New("want a single value, not a list or a mapping")
			}
			if n.ShortTag() == "!!null" {
				return nil
			}
			_, err := k.read(n)
			return err
		},
		check: func(s *S, n *yaml.Node) (int, string) {
			ptr := at(s)
			if ptr == nil {
				return 0, "" // a pointer field left unset
			}
			v := *ptr
			text, line := k.show(v), 0
			if n != nil && n.Kind == yaml.ScalarNode {
				if fromFile, err := k.read(n); err == nil && same(fromFile, v) {
					line = n.Line
					if k.echo {
						text = n.Value
					}
				}
			}
			return line, r(v, text, k.show)
		},
	}
}

// same is ==, except that NaN is the same as NaN.
func same[V comparable](a, b V) bool { return a == b || (a != a && b != b) }

// checkKeys applies a section's rules in table order and returns the first
// refusal: the key, its line (0 if not from the file) and the problem.
func checkKeys[S any](keys []key[S], s *S, src map[string]*yaml.Node, path string) (name string, line int, problem string) {
	for _, k := range keys {
		var n *yaml.Node
		if src != nil {
			n = src[path+"."+k.name]
		}
		if line, problem := k.check(s, n); problem != "" {
			return k.name, line, problem
		}
	}
	return "", 0, ""
}

// readKeys reads the text of every key of a section present in the mapping
// m, remembering each key's node under path.key for Validate's line numbers.
func readKeys[S any](keys []key[S], m *yaml.Node, path string, src map[string]*yaml.Node) error {
	for _, k := range keys {
		n := lookup(m, k.name)
		if n == nil {
			continue
		}
		src[path+"."+k.name] = n
		if err := k.read(n); err != nil {
			return fmt.Errorf("line %d: %s.%s: %w", n.Line, path, k.name, err)
		}
	}
	return nil
}

// lookup returns the value of key in the mapping n, following aliases and
// merge keys (<<) as the decoder does; nil if there is none.
func lookup(n *yaml.Node, key string) *yaml.Node {
	return lookupIn(n, key, map[*yaml.Node]bool{})
}

// lookupIn is lookup that visits each mapping once: a merge key may name
// its own mapping (&a {<<: *a}), which would otherwise recurse until the
// stack overflows (found by FuzzParse).
func lookupIn(n *yaml.Node, key string, seen map[*yaml.Node]bool) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode || seen[n] {
		return nil
	}
	seen[n] = true
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Value == key && k.ShortTag() != "!!merge":
			return deref(v)
		case k.ShortTag() == "!!merge":
			if v = deref(v); v != nil && v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
		}
	}
	for _, m := range merged {
		if v := lookupIn(m, key, seen); v != nil {
			return v
		}
	}
	return nil
}

func deref(n *yaml.Node) *yaml.Node {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode && depth < 100; depth++ {
		n = n.Alias
	}
	return n
}

// Kinds.
var (
	duration = kind[time.Duration]{
		read: func(n *yaml.Node) (time.Duration, error) {
			// A bare number would be nanoseconds (interval: 30 is 30ns):
			// time.ParseDuration insists on a unit, except for 0.
			d, err := time.ParseDuration(n.Value)
			if err != nil {
				return 0, fmt.Errorf("%q is not a duration such as 30s, 5m or 100ms", n.Value)
			}
			return d, nil
		},
		show: showDuration,
		echo: true,
	}
	size = kind[ByteSize]{
		read: func(n *yaml.Node) (ByteSize, error) { return ParseByteSize(n.Value) },
		show: showSize,
		echo: true,
	}
	count = kind[int]{
		read: func(n *yaml.Node) (int, error) {
			var v int
			if n.ShortTag() != "!!int" || n.Decode(&v) != nil {
				return 0, fmt.Errorf("%q is not a whole number", n.Value)
			}
			return v, nil
		},
		show: strconv.Itoa,
		echo: true,
	}
	ratio = kind[float64]{
		read: func(n *yaml.Node) (float64, error) {
			var v float64
			if t := n.ShortTag(); t != "!!float" && t != "!!int" || n.Decode(&v) != nil {
				return 0, fmt.Errorf("%q is not a number", n.Value)
			}
			return v, nil
		},
		show: func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) },
		echo: true,
	}
	text = kind[string]{
		read: func(n *yaml.Node) (string, error) { return n.Value, nil },
		show: strconv.Quote,
	}
)

// Rules.

// within bounds a value to [lo, hi].
func within[V cmp.Ordered](lo, hi V) rule[V] {
	return func(v V, text string, show func(V) string) string {
		switch {
		case v < lo:
			return fmt.Sprintf("%s is below the minimum of %s", text, show(lo))
		case v > hi:
			return fmt.Sprintf("%s is above the maximum of %s", text, show(hi))
		}
		return ""
	}
}

// fraction is [0, 1), and never NaN.
func fraction(v float64, text string, _ func(float64) string) string {
	if !(v >= 0 && v < 1) {
		return text + " is not in [0, 1)"
	}
	return ""
}

// optional passes the empty string (the key is unset) and checks the rest.
func optional(r rule[string]) rule[string] {
	return func(v, text string, show func(string) string) string {
		if v == "" {
			return ""
		}
		return r(v, text, show)
	}
}

// offOr passes 0 (the thing is off) and checks the rest.
func offOr(r rule[time.Duration]) rule[time.Duration] {
	return func(v time.Duration, text string, show func(time.Duration) string) string {
		if v == 0 {
			return ""
		}
		if problem := r(v, text, show); problem != "" {
			return problem + " (0 turns it off)"
		}
		return ""
	}
}

// oneOf is an enumeration; the empty string is "required".
func oneOf(values ...string) rule[string] {
	return func(v, text string, _ func(string) string) string {
		if v == "" {
			return "required (" + strings.Join(values, " or ") + ")"
		}
		for _, ok := range values {
			if v == ok {
				return ""
			}
		}
		return fmt.Sprintf("%s is not one of %s", text, strings.Join(values, ", "))
	}
}

// nameChars is what a probe name may hold: it becomes part of file names
// and the value of the probe label.
var nameChars = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func probeName(v, text string, _ func(string) string) string {
	switch {
	case v == "":
		return "required"
	case !nameChars.MatchString(v) || strings.Contains(v, ".."):
		return text + ` is not a probe name: use 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit, without ".." (it is part of file names and the probe label)`
	}
	return ""
}

// absPath is a host path the daemon opens: absolute, no ".." element (it
// would be resolved through whatever symlinks the parents are), openable.
func absPath(v, text string, _ func(string) string) string {
	switch {
	case strings.ContainsRune(v, 0):
		return text + " contains a NUL byte"
	case len(v) > maxPath:
		return fmt.Sprintf("%d bytes is longer than a path can be (%d)", len(v), maxPath)
	case !strings.HasPrefix(v, "/"):
		return text + " is not an absolute path"
	}
	for _, el := range strings.Split(v, "/") {
		if el == ".." {
			return text + ` contains ".."; name the path directly`
		}
	}
	return ""
}

// devPath is a device node for smartctl: absPath under /dev.
func devPath(v, text string, show func(string) string) string {
	if !strings.HasPrefix(v, "/dev/") {
		return text + " is not a /dev path"
	}
	return absPath(v, text, show)
}

// command is a program to run: a name looked up in PATH or a path, never
// something smartctl's caller could take for an option.
func command(v, text string, _ func(string) string) string {
	switch {
	case v == "":
		return "required: the smartctl binary"
	case strings.ContainsAny(v, "\x00\n"):
		return text + " contains a NUL byte or a newline"
	case strings.HasPrefix(v, "-"):
		return text + ` starts with "-"`
	case len(v) > maxPath:
		return fmt.Sprintf("%d bytes is longer than a path can be (%d)", len(v), maxPath)
	}
	return ""
}

// matches requires v to match re; what says what v should be.
func matches(re *regexp.Regexp, what string) rule[string] {
	return func(v, text string, _ func(string) string) string {
		if !re.MatchString(v) {
			return text + " is not " + what
		}
		return ""
	}
}

// compiles requires a Go (RE2) regexp of bounded length.
func compiles(v, text string, _ func(string) string) string {
	if len(v) > maxRegex {
		return fmt.Sprintf("%d bytes is longer than the limit of %d for a regexp", len(v), maxRegex)
	}
	if _, err := regexp.Compile(v); err != nil {
		return fmt.Sprintf("%s does not compile: %v", text, err)
	}
	return ""
}

// showDuration is time.Duration.String without the trailing zero units
// (24h, not 24h0m0s).
func showDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Show writes the size as a config file takes it ("1GiB", "2300B"), so a
// log line's size can be copied into the config.
func (b ByteSize) Show() string { return showSize(b) }

// showSize writes a size in the largest binary unit that divides it.
func showSize(b ByteSize) string {
	for _, u := range []struct {
		suffix string
		mult   ByteSize
	}{{"EiB", 1 << 60}, {"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && b%u.mult == 0 {
			return strconv.FormatInt(int64(b/u.mult), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// sizeNumber is the number part of a size: decimal, an optional fraction
// and exponent; no sign, hex, NaN or Inf, which ParseFloat would take.
var sizeNumber = regexp.MustCompile(`^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// ParseByteSize parses "2300", "4KiB", "1.5GB", and fio's "4k", "1G". It
// refuses what an int64 cannot hold, quoting the text as given: a size is
// never wrapped negative.
func ParseByteSize(s string) (ByteSize, error) {
	num := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			mult = u.mult
			num = strings.TrimSpace(strings.TrimSuffix(num, u.suffix))
			break
		}
	}
	if !sizeNumber.MatchString(num) {
		return 0, fmt.Errorf("invalid size %q (want e.g. 4096, 4k, 4KiB, 1G, 1GiB, 1.5GB)", s)
	}
	tooLarge := fmt.Errorf("size %q is too large (the limit is 8EiB)", s)
	if i, err := strconv.ParseInt(num, 10, 64); err == nil {
		if i > math.MaxInt64/mult {
			return 0, tooLarge
		}
		return ByteSize(i * mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	v := f * float64(mult)
	// float64(math.MaxInt64) rounds up to 2^63, which does not fit.
	if err != nil || v >= float64(math.MaxInt64) {
		return 0, tooLarge
	}
	return ByteSize(v), nil
}

// capacityRates is the rates key: a list, so a row of its own, held to
// CheckCapacityRates.
var capacityRates = key[Probe]{
	name: "rates",
	read: func(n *yaml.Node) error {
		n = deref(n)
		if n.Kind != yaml.SequenceNode {
			return errors.New("want a list of IOPS rates, e.g. [400, 500, 630]")
		}
		for _, item := range n.Content {
			if _, err := ratio.read(deref(item)); err != nil {
				return err
			}
		}
		return nil
	},
	check: func(p *Probe, n *yaml.Node) (int, string) {
		if p.Kind != KindCapacity || p.Rates == nil {
			return 0, ""
		}
		line := 0
		if n != nil {
			line = n.Line
		}
		if err := CheckCapacityRates(p.Rates); err != nil {
			return line, err.Error()
		}
		return 0, ""
	},
}

// CheckCapacityRates holds a sweep's rates to what a sweep can use: each
// an IOPS over 0 and at most MaxCapacityRate, at most MaxCapacitySteps of
// them, each asking more than the one before: the sweep stops at the first
// step that breaks the bound, which only means a knee if the load rises.
// The config's rates key and check's --rates both ask it.
func CheckCapacityRates(rates []float64) error {
	switch {
	case len(rates) == 0:
		return errors.New("an empty list; leave the key out for the default rates")
	case len(rates) > MaxCapacitySteps:
		return fmt.Errorf("%d steps; at most %d", len(rates), MaxCapacitySteps)
	}
	for i, r := range rates {
		show := strconv.FormatFloat(r, 'f', -1, 64)
		if !(r > 0 && r <= MaxCapacityRate) {
			return fmt.Errorf("%s is not an IOPS rate (a number over 0, at most %d)", show, MaxCapacityRate)
		}
		if i > 0 && r <= rates[i-1] {
			return fmt.Errorf("the rates must rise, and %s follows %s", show, strconv.FormatFloat(rates[i-1], 'f', -1, 64))
		}
	}
	return nil
}

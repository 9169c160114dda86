package cgroupio

import (
	"cmp"
	"path"
	"slices"
	"time"
)

// Workload names that are not a cgroup's.
const (
	// Other is every cgroup past the top N of a device, summed.
	Other = "other"
	// Self is the name of the reader's own cgroup (the daemon's I/O:
	// its probes): shown as itself and never ranked.
	Self = "diskcanary"
)

// TrackerConfig says how a Tracker ranks.
type TrackerConfig struct {
	// Version is the Source's: v2 counters are hierarchical (a parent's
	// io.stat holds its children's), v1's are each cgroup's own.
	Version int
	// Top is how many cgroups each device shows by name; the rest are Other.
	Top int
	// Decay weighs past passes in the ranking: a cgroup's score is its
	// bytes this pass plus Decay times its score last pass. 0 ranks by the
	// last pass alone (top's interval), 0.5 halves each pass's weight.
	Decay float64
	// SelfPath is the reader's own cgroup; "" or the root ("/", which holds
	// every process not in a cgroup) names none.
	SelfPath string
}

// Tracker turns successive passes into per-device rankings whose counters
// only go up: each row's counters are the sum of the increases diskcanary
// saw (a cgroup first seen brings its history), so a cgroup moving in or
// out of a device's top N moves its increases, not its total, between its
// row and Other, and a vanished cgroup's row goes while Other keeps what it
// added.
type Tracker struct {
	cfg     TrackerConfig
	passes  int
	lastOK  bool // the previous pass walked the whole tree
	last    time.Time
	cgroups map[string]*cgState
	devices map[Dev]*devState
	cands   map[Dev][]*cgDev
}

type cgState struct {
	path     string
	workload string
	seen     int // the pass it was last seen in
	devs     []*cgDev
	// raw is the last pass's counters as the kernel had them (v2:
	// hierarchical), dead what vanished children left in them (v2).
	raw  []DevStat
	dead []DevStat
	// own is this pass's counters of the cgroup alone: raw, less its
	// children's raw and dead on v2.
	own []DevStat
}

type cgDev struct {
	cg    *cgState
	dev   Dev
	last  Counts // own counters at the last pass
	acc   Counts // the row's counters
	delta Counts // this pass's increase
	score float64
	seen  int
}

type devState struct {
	other      Counts
	otherDelta Counts
	hasOther   bool
	seen       int
}

// NewTracker returns an empty tracker.
func NewTracker(cfg TrackerConfig) *Tracker {
	if cfg.Top < 1 {
		cfg.Top = 1
	}
	if cfg.SelfPath == "/" {
		cfg.SelfPath = ""
	}
	return &Tracker{cfg: cfg, cgroups: map[string]*cgState{}, devices: map[Dev]*devState{}, cands: map[Dev][]*cgDev{}}
}

// Row is one workload's line in a device's ranking.
type Row struct {
	Workload string
	// Cgroup is the cgroup's path, "" for Other.
	Cgroup string
	// Total is the row's counters; Delta their increase in this pass.
	Total, Delta Counts
}

// Ranking is one device's rows: the top N by recent I/O first, then the
// reader's own cgroup (Self) and Other when they have I/O.
type Ranking struct {
	Dev  Dev
	Rows []Row
}

// Snapshot is what one pass gives.
type Snapshot struct {
	Time time.Time
	// Interval is the time since the previous pass (0 for the first).
	Interval time.Duration
	Devices  []Ranking
	Pass     Pass // the walk's counts (Cgroups not kept)
}

// Observe takes one pass and returns the rankings. A cgroup missing from
// a truncated pass keeps its state: it was not walked, not removed.
func (t *Tracker) Observe(p *Pass, now time.Time) Snapshot {
	t.passes++
	complete := p.Truncated == ""
	// Whether a cgroup or device line new in this pass did all its I/O
	// since the last pass: only if the last pass saw the whole tree.
	fresh := t.passes > 1 && t.lastOK
	for i := range p.Cgroups {
		c := &p.Cgroups[i]
		st := t.cgroups[c.Path]
		if st == nil {
			st = &cgState{path: c.Path, workload: Workload(c.Path)}
			if t.cfg.SelfPath != "" && c.Path == t.cfg.SelfPath {
				st.workload = Self
			}
			t.cgroups[c.Path] = st
		}
		st.seen = t.passes
	}
	t.forgetVanished(complete)
	t.ownCounts(p)

	for _, c := range t.cands {
		clear(c)
	}
	for k, c := range t.cands {
		t.cands[k] = c[:0]
	}
	for i := range p.Cgroups {
		st := t.cgroups[p.Cgroups[i].Path]
		for _, s := range st.own {
			d := st.dev(s.Dev)
			newLine := d.seen == 0
			if newLine {
				d.delta = s.Counts
				d.acc = s.Counts
			} else {
				d.delta = s.Counts.since(d.last)
				d.acc.add(d.delta)
			}
			d.last, d.seen = s.Counts, t.passes
			recent := d.delta
			if newLine && !fresh {
				recent = Counts{} // history, not recent I/O
			}
			d.score = d.score*t.cfg.Decay + float64(recent.Bytes()) + float64(recent.Ops())/1e6
			if d.acc.zero() {
				continue
			}
			t.cands[s.Dev] = append(t.cands[s.Dev], d)
		}
		// A device line gone from a live cgroup (v2: its I/O now all its
		// children's) stops being a row.
		st.devs = slices.DeleteFunc(st.devs, func(d *cgDev) bool { return d.seen != t.passes })
	}
	// A truncated pass did not reach some cgroups: they keep their rows,
	// with no I/O this pass, rather than drop out and come back.
	for _, st := range t.cgroups {
		if st.seen == t.passes {
			continue
		}
		for _, d := range st.devs {
			d.delta = Counts{}
			d.score *= t.cfg.Decay
			if !d.acc.zero() {
				t.cands[d.dev] = append(t.cands[d.dev], d)
			}
		}
	}

	snap := Snapshot{Time: now, Pass: *p}
	snap.Pass.Cgroups = nil
	if !t.last.IsZero() {
		snap.Interval = now.Sub(t.last)
	}
	t.last, t.lastOK = now, complete
	for dev, cands := range t.cands {
		if len(cands) == 0 {
			delete(t.cands, dev)
			continue
		}
		snap.Devices = append(snap.Devices, t.rank(dev, cands))
	}
	for dev, ds := range t.devices {
		if ds.seen != t.passes && complete {
			delete(t.devices, dev)
		}
	}
	slices.SortFunc(snap.Devices, func(a, b Ranking) int {
		return cmp.Or(cmp.Compare(a.Dev.Major, b.Dev.Major), cmp.Compare(a.Dev.Minor, b.Dev.Minor))
	})
	return snap
}

func (st *cgState) dev(dev Dev) *cgDev {
	for _, d := range st.devs {
		if d.dev == dev {
			return d
		}
	}
	d := &cgDev{cg: st, dev: dev}
	st.devs = append(st.devs, d)
	return d
}

// forgetVanished drops the cgroups a complete pass did not see. On v2 what
// a vanished cgroup did stays in its parent's hierarchical counters, so it
// is remembered there (dead) and not counted as the parent's own I/O.
func (t *Tracker) forgetVanished(complete bool) {
	for p, st := range t.cgroups {
		if st.seen == t.passes {
			continue
		}
		// Unseen in a truncated pass: kept a while, in case the next walk
		// gets there; a tree truncated every pass still forgets it.
		if !complete && t.passes-st.seen < 10 {
			continue
		}
		delete(t.cgroups, p)
		if t.cfg.Version != 2 || !complete {
			continue
		}
		if parent := t.cgroups[path.Dir(p)]; parent != nil && parent.seen == t.passes {
			for _, s := range st.raw {
				var d *DevStat
				parent.dead, d = find(parent.dead, s.Dev)
				d.add(s.Counts)
			}
		}
	}
}

// ownCounts sets each seen cgroup's raw and own counters. v1's are the
// cgroup's own already. v2's own are raw less each child's raw and the
// vanished children's: the pass lists parents before children, so each
// child's raw is subtracted from its parent's own before the child's own
// is touched.
func (t *Tracker) ownCounts(p *Pass) {
	for i := range p.Cgroups {
		c := &p.Cgroups[i]
		st := t.cgroups[c.Path]
		st.raw = append(st.raw[:0], c.Stats...)
		st.own = append(st.own[:0], c.Stats...)
		if t.cfg.Version != 2 {
			continue
		}
		for _, d := range st.dead {
			for j := range st.own {
				if st.own[j].Dev == d.Dev {
					st.own[j].Counts = st.own[j].Counts.since(d.Counts)
				}
			}
		}
		t.subtractFromParent(c.Path, c.Stats)
	}
	if t.cfg.Version != 2 {
		return
	}
	// Children a truncated pass did not reach are still in their parent's
	// counters: their last ones come off too, or the parent would seem to
	// have done their I/O for the pass.
	for p, st := range t.cgroups {
		if st.seen != t.passes {
			t.subtractFromParent(p, st.raw)
		}
	}
}

// subtractFromParent takes a v2 child's counters off its parent's own, if
// the parent was seen in this pass.
func (t *Tracker) subtractFromParent(child string, stats []DevStat) {
	parent := t.cgroups[path.Dir(child)]
	if child == "/" || parent == nil || parent.seen != t.passes {
		return
	}
	for _, s := range stats {
		for j := range parent.own {
			if parent.own[j].Dev == s.Dev {
				parent.own[j].Counts = parent.own[j].Counts.since(s.Counts)
			}
		}
	}
}

// rank orders one device's cgroups: by score, then total bytes, then path,
// so equal cgroups keep their places from pass to pass.
func (t *Tracker) rank(dev Dev, cands []*cgDev) Ranking {
	ds := t.devices[dev]
	if ds == nil {
		ds = &devState{}
		t.devices[dev] = ds
	}
	ds.seen = t.passes
	ds.otherDelta = Counts{}
	slices.SortFunc(cands, func(a, b *cgDev) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.acc.Bytes(), a.acc.Bytes()),
			cmp.Compare(b.acc.Ops(), a.acc.Ops()), cmp.Compare(a.cg.path, b.cg.path))
	})
	r := Ranking{Dev: dev, Rows: make([]Row, 0, min(len(cands), t.cfg.Top)+2)}
	var self *cgDev
	shown := 0
	for _, d := range cands {
		switch {
		case d.cg.workload == Self && d.cg.path == t.cfg.SelfPath:
			self = d
		case shown < t.cfg.Top:
			r.Rows = append(r.Rows, Row{Workload: d.cg.workload, Cgroup: d.cg.path, Total: d.acc, Delta: d.delta})
			shown++
		default:
			ds.other.add(d.delta)
			ds.otherDelta.add(d.delta)
			ds.hasOther = true
		}
	}
	if self != nil {
		r.Rows = append(r.Rows, Row{Workload: self.cg.workload, Cgroup: self.cg.path, Total: self.acc, Delta: self.delta})
	}
	if ds.hasOther {
		r.Rows = append(r.Rows, Row{Workload: Other, Total: ds.other, Delta: ds.otherDelta})
	}
	return r
}

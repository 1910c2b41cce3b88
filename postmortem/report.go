package postmortem

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/recording"
)

// Options select and tune a postmortem.
type Options struct {
	As         map[string]string // file -> side label (default: the recorded host name)
	Config     apm.Config        // zero: apm.DefaultConfig()
	Deadline   time.Duration     // if set, overrides Config.RearmDeadline
	MaxEntries int               // timeline entries kept per QP; 0: 2000
	Devices    []string          // show only these devices' QPs, pairs and findings
	QPNs       []uint32          // and these QPs
	Since      Bound             // and this time window
	Until      Bound
	Now        time.Time    // what -DURATION bounds count back from (time.Now() when zero)
	All        bool         // timelines of every QP, not only those with APM activity
	Warn       func(string) // each distinct recording warning, once
	Progress   io.Writer    // a terminal: draw a progress bar on it
}

// ReportSchema is the version of the report's JSON shape (-o json), its
// "schema": a version only adds fields; one that removes or changes a
// field is a new number.
const ReportSchema = 1

// Report is the result of a postmortem. Times are aligned wall-clock times
// (see Clock); JSON field names are an interface.
type Report struct {
	Schema     int         `json:"schema"` // ReportSchema
	Recordings []Recording `json:"recordings"`
	Summary    Summary     `json:"summary"`
	Clocks     []Clock     `json:"clocks"`
	Findings   []Finding   `json:"findings"`
	QPs        []QP        `json:"qps"`
	Pairs      []Pair      `json:"pairs"`
	// Unpaired lists the QPs whose QPNs point at each other but whose
	// identity the evidence does not confirm (at most maxUnpaired).
	Unpaired []Unpaired `json:"unpaired"`
}

// Recording describes one replayed stream (one writer session).
type Recording struct {
	Side         string       `json:"side"`
	Host         string       `json:"host"`
	Kernel       string       `json:"kernel"`
	Version      string       `json:"version"`
	Files        []string     `json:"files"`
	Bytes        int64        `json:"bytes"`
	Events       uint64       `json:"events"`
	Stats        event.Stats  `json:"recorded_stats"`
	MissingHooks []string     `json:"missing_hooks"`
	Start        time.Time    `json:"start,omitzero"`
	End          time.Time    `json:"end,omitzero"` // deadlines are judged up to here
	Warnings     []string     `json:"warnings"`
	Model        *ModelCounts `json:"model,omitempty"` // set when the model met any of these
}

// ModelCounts are what the model could not judge the ordinary way.
type ModelCounts struct {
	Late         uint64 `json:"late"`         // inputs older than the reorder window, judged at their own time
	Duplicates   uint64 `json:"duplicates"`   // second copies of one QP event
	Unattributed uint64 `json:"unattributed"` // CM and driver events tied to no QP
	Dropped      uint64 `json:"dropped"`      // events for new QPs past --max-qps
	Reboots      uint64 `json:"new_boots"`
}

// Summary counts everything replayed, before the display filters.
type Summary struct {
	Recordings int            `json:"recordings"`
	Events     uint64         `json:"events"`
	Lost       uint64         `json:"lost_events"`
	QPs        int            `json:"qps"`
	Migrations int            `json:"migrations"` // migrations of QPs (a PATH_MIG seen by two hooks counts once)
	Pairs      int            `json:"pairs"`
	Unpaired   int            `json:"unpaired"` // candidates not confirmed (Report.Unpaired)
	Findings   map[string]int `json:"findings_by_kind"`
	Resolved   int            `json:"resolved"`
	Warnings   int            `json:"warnings"`
	Shown      int            `json:"timelines_shown"`
	// What the report's bounds left out (docs/postmortem.md, "Bounds").
	DroppedQPs      uint64 `json:"qps_dropped"`      // events of QPs beyond --max-qps
	DroppedTimeline uint64 `json:"timeline_dropped"` // entries beyond the report's total
	DroppedFindings uint64 `json:"findings_dropped"`
	DroppedSteps    uint64 `json:"steps_dropped"` // migrations and rearms not kept for pairing
	DroppedWarnings uint64 `json:"warnings_dropped"`
}

// Finding is a model or pairing finding, as every output writes one
// (findingline.Line: host is the recording's), with its side and its
// resolution.
type Finding struct {
	findingline.Line
	Side       string            `json:"side"`
	Resolution *findingline.Line `json:"resolution,omitempty"`
}

// QP is one QP history with its timeline.
type QP struct {
	ID         string      `json:"id"`
	Side       string      `json:"side"`
	Device     string      `json:"device"`
	QPN        uint32      `json:"qpn"`
	Gen        uint32      `json:"gen"`
	PID        uint32      `json:"pid"`
	Comm       string      `json:"comm"`
	DestQPN    uint32      `json:"dest_qpn,omitempty"`
	Primary    *event.Path `json:"primary,omitempty"`
	Alt        *event.Path `json:"alt,omitempty"`
	First      time.Time   `json:"first"`
	Last       time.Time   `json:"last"`
	Migrations int         `json:"migrations"`
	Rearms     int         `json:"rearms"`
	Peer       string      `json:"peer,omitempty"`
	Findings   []int       `json:"findings"` // indexes into Report.Findings
	Entries    []Entry     `json:"timeline"`
	Dropped    int         `json:"timeline_dropped,omitempty"`
	MigratedAt []time.Time `json:"-"` // each migration (the HTML page's episode bands)
	RearmedAt  []time.Time `json:"-"` // each successful rearm
}

// Entry is one timeline point.
type Entry struct {
	Time   time.Time `json:"time"`
	Seq    uint64    `json:"seq"`
	Kind   string    `json:"kind"`
	What   string    `json:"what"`
	Detail string    `json:"detail"`
	Fail   bool      `json:"failed,omitempty"`
	// Repeats counts the readings alike that followed this one at once
	// (shown once, not listed again).
	Repeats int `json:"repeats,omitempty"`
}

// Run replays the recordings at paths and builds the report.
func Run(ctx context.Context, paths []string, o Options) (*Report, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("no recording given")
	}
	if o.Config == (apm.Config{}) {
		o.Config = apm.DefaultConfig()
		o.Config.MaxQPs = DefaultMaxQPs
	}
	if o.Deadline > 0 {
		o.Config.RearmDeadline = o.Deadline
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 2000
	}
	if err := checkWindow(o.Since, o.Until); err != nil {
		return nil, err
	}
	ss, err := group(paths, o.As)
	if err != nil {
		return nil, err
	}
	alignClocks(ss)
	seen := map[string]bool{}
	b := newBudget()
	warn := func(w recording.Warning) {
		s := w.String()
		switch {
		case seen[s]:
		case len(seen) >= maxWarnings*len(ss):
			b.DroppedWarnings++
		default:
			seen[s] = true
			if o.Warn != nil {
				o.Warn("warning: " + escape.Text(s))
			}
		}
	}
	p := newProgress(o.Progress, ss)
	ids := &apm.IDs{} // one allocator: every finding of the report has its own ID
	for _, s := range ss {
		if err := s.replay(ctx, o.Config, ids, o.MaxEntries, b, warn, p.tick); err != nil {
			p.done()
			return nil, err
		}
		p.finished(s)
	}
	p.done()
	if since, until := window(ss, o); !since.IsZero() && !until.IsZero() && until.Before(since) {
		return nil, invertedError(since, until)
	}
	clocks := boundClocks(ss)
	pairs, unpaired, nUnpaired := pairUp(ss)
	osr := oneSided(pairs, o.Config.RearmDeadline, ids)
	rep := build(ss, clocks, pairs, osr, o)
	rep.Unpaired, rep.Summary.Unpaired = append([]Unpaired{}, unpaired...), nUnpaired
	rep.Summary.Warnings = len(seen)
	if o.Warn != nil {
		for _, w := range unmatched(ss, rep, o) {
			o.Warn("warning: " + w)
		}
	}
	if b.DroppedWarnings > 0 && o.Warn != nil {
		o.Warn(fmt.Sprintf("warning: %d more warnings not shown", b.DroppedWarnings))
	}
	sum := &rep.Summary
	sum.DroppedQPs, sum.DroppedTimeline, sum.DroppedFindings = b.DroppedQPs, b.DroppedTimeline, b.DroppedFindings
	sum.DroppedSteps, sum.DroppedWarnings = b.DroppedSteps, b.DroppedWarnings
	return rep, nil
}

func matchQP(o *Options, h *hist) bool {
	return (len(o.Devices) == 0 || slices.Contains(o.Devices, h.device)) &&
		(len(o.QPNs) == 0 || slices.Contains(o.QPNs, h.qpn))
}

func (h *hist) id() string { return fmt.Sprintf("%s/%s/%d#%d", h.s.label, h.device, h.qpn, h.gen) }

func (h *hist) interesting() bool {
	return len(h.findings) > 0 || h.nMig > 0 || h.nRearm > 0 || h.alt != nil
}

// build turns the replayed streams into the report, applying the filters
// to findings, QPs and pairs (not to the summary).
func build(ss []*stream, clocks []Clock, pairs []*pairing, osr []finding, o Options) *Report {
	rep := &Report{Schema: ReportSchema, Summary: Summary{Recordings: len(ss), Findings: map[string]int{}},
		Clocks: append([]Clock{}, clocks...), Findings: []Finding{}, QPs: []QP{}, Pairs: []Pair{}, Unpaired: []Unpaired{}}
	since, until := window(ss, o)
	inWindow := func(a, b time.Time) bool {
		return (since.IsZero() || !b.Before(since)) && (until.IsZero() || !a.After(until))
	}
	// Findings: every stream's, then the pairing layer's, resolutions folded.
	all := []finding{}
	for _, s := range ss {
		all = append(all, s.raw...)
	}
	all = append(all, osr...)
	type fkey struct {
		s  *stream
		id uint64
	}
	index := map[fkey]int{}
	once := map[onceKey]int{} // one finding of one boot, from two recordings of it
	var fs []Finding
	var owners []*hist
	for _, f := range all {
		if !f.Resolved {
			k := onceKey{boot: bootKey(f.s), dev: f.QP.Device, qpn: f.QP.QPN, kind: f.Kind, first: f.First}
			if i, ok := once[k]; ok {
				index[fkey{f.s, f.ID}] = i // its resolution folds into the one kept
				continue
			}
			once[k] = len(fs)
		}
		if f.Resolved {
			rep.Summary.Resolved++
			if i, ok := index[fkey{f.s, f.Resolves}]; ok {
				r := f.Finding
				r.FirstTime, r.LastTime = f.s.wall(r.First), f.s.wall(r.Last)
				l := findingline.New(r, f.s.hdr.Meta.Host)
				fs[i].Resolution = &l
			}
			continue
		}
		rep.Summary.Findings[string(f.Kind)]++
		g := Finding{Side: f.s.label, Line: findingline.New(f.Finding, f.s.hdr.Meta.Host)}
		g.FirstTime, g.LastTime = f.s.wall(f.First), f.s.wall(f.Last)
		index[fkey{f.s, f.ID}] = len(fs)
		fs = append(fs, g)
		owners = append(owners, f.s.h.owner(f.QP.Device, f.QP.QPN, f.First))
	}
	order := make([]int, len(fs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return fs[order[a]].FirstTime.Before(fs[order[b]].FirstTime) })
	shownQP := map[*hist]bool{}
	for _, i := range order {
		f, h := fs[i], owners[i]
		if h != nil && !matchQP(&o, h) || h == nil && (len(o.QPNs) > 0 || len(o.Devices) > 0 && !slices.Contains(o.Devices, f.QP.Device)) {
			continue
		}
		if !inWindow(f.FirstTime, f.LastTime) {
			continue
		}
		if h != nil {
			h.findings = append(h.findings, len(rep.Findings))
		}
		rep.Findings = append(rep.Findings, f)
	}
	// QPs and pairs.
	for _, s := range ss {
		rep.Recordings = append(rep.Recordings, s.recording())
		rep.Summary.Events += s.res.Events
		rep.Summary.Lost += s.res.Stats.Dropped()
		for _, h := range s.h.all {
			rep.Summary.QPs++
			rep.Summary.Migrations += h.nMig
			inWin := func(h *hist) bool { return inWindow(h.s.wall(h.first), h.s.wall(h.last)) }
			show := matchQP(&o, h) && (o.All || len(o.QPNs) > 0 || len(o.Devices) > 0 || h.interesting()) && inWin(h)
			if show || h.peer != nil && matchQP(&o, h.peer) && (o.All || h.peer.interesting()) && inWin(h.peer) {
				shownQP[h] = true
			}
		}
	}
	for _, s := range ss {
		for _, h := range s.h.all {
			if shownQP[h] {
				rep.QPs = append(rep.QPs, h.report(since, until))
			}
		}
	}
	rep.Summary.Shown = len(rep.QPs)
	rep.Summary.Pairs = len(pairs)
	for _, p := range pairs {
		if shownQP[p.a] || shownQP[p.b] {
			rep.Pairs = append(rep.Pairs, p.report())
		}
	}
	return rep
}

// owner is the history a finding about (device, qpn) at boot belongs to:
// the latest generation that existed by then.
func (hs *histories) owner(device string, qpn uint32, boot uint64) *hist {
	gens := hs.byKey[event.QPKey{Device: device, QPN: qpn}] // in order of their first event
	i := sort.Search(len(gens), func(i int) bool { return gens[i].first > boot })
	switch {
	case len(gens) == 0:
		return nil
	case i == 0:
		return gens[0]
	}
	return gens[i-1]
}

func (s *stream) firstBoot() uint64 {
	var first uint64
	for _, h := range s.h.all {
		if first == 0 || h.first < first {
			first = h.first
		}
	}
	if first == 0 {
		first = s.last
	}
	return first
}

func (s *stream) recording() Recording {
	r := Recording{Side: s.label, Host: s.hdr.Meta.Host, Kernel: s.hdr.Meta.Kernel, Version: s.hdr.Meta.Version,
		Files: s.files, Bytes: s.size, Events: s.res.Events, Stats: s.res.Stats,
		Warnings: s.res.Warnings, MissingHooks: []string{}}
	for _, k := range s.hdr.Meta.Hooks {
		if k.Method == event.HookMissing {
			r.MissingHooks = append(r.MissingHooks, k.Name)
		}
	}
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	if r.Stats.LostPerCPU == nil {
		r.Stats.LostPerCPU = []uint64{}
	}
	if s.res.Events > 0 {
		r.Start, r.End = s.wall(s.firstBoot()), s.wall(s.endBoot)
	}
	if m := s.res.Model; m.Late+m.Duplicates+m.Unattributed+m.Dropped+m.Reboots > 0 {
		r.Model = &ModelCounts{Late: m.Late, Duplicates: m.Duplicates, Unattributed: m.Unattributed, Dropped: m.Dropped, Reboots: m.Reboots}
	}
	return r
}

func (h *hist) report(since, until time.Time) QP {
	s := h.s
	q := QP{ID: h.id(), Side: s.label, Device: h.device, QPN: h.qpn, Gen: h.gen, PID: h.pid, Comm: h.comm,
		DestQPN: h.destQPN, Primary: h.primary, Alt: h.alt, First: s.wall(h.first), Last: s.wall(h.last),
		Migrations: h.nMig, Rearms: h.nRearm, Findings: h.findings, Dropped: h.dropped,
		Entries: []Entry{}}
	if q.Findings == nil {
		q.Findings = []int{}
	}
	if h.peer != nil {
		q.Peer = h.peer.id()
	}
	for _, b := range h.migrations {
		q.MigratedAt = append(q.MigratedAt, s.wall(b))
	}
	for _, b := range h.rearms {
		q.RearmedAt = append(q.RearmedAt, s.wall(b))
	}
	for _, e := range h.entries {
		t := s.wall(e.Boot)
		if !since.IsZero() && t.Before(since) || !until.IsZero() && t.After(until) {
			continue
		}
		q.Entries = append(q.Entries, Entry{Time: t, Seq: e.Seq, Kind: e.Kind, What: e.What, Detail: e.Detail, Fail: e.Fail, Repeats: e.repeats})
	}
	return q
}

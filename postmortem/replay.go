package postmortem

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
)

// idleJudged bounds how far past its last event a recording's deadlines are
// judged: up to when the file was last written, at most this much later.
const idleJudged = 10 * time.Minute

// maxMADs bounds the CM MADs a stream keeps for clock bounds and LAPs.
const maxMADs = 100_000

// finding is a model finding with the stream it came from.
type finding struct {
	s *stream
	apm.Finding
}

// mad is a CM MAD kept for pairing: clock bounds and where a LAP went.
type mad struct {
	boot   uint64
	dir    event.MADDir
	attr   uint16
	tid    uint64
	local  uint32
	remote uint32
	h      *hist
}

// streamResult is what a replay of one stream counted.
type streamResult struct {
	Events   uint64
	Stats    event.Stats
	Model    apm.Stats
	Warnings []string
	// WarningsDropped counts the warnings beyond maxWarnings.
	WarningsDropped uint64
	Elapsed         time.Duration
}

// replay feeds the stream's events to a new model and files them into
// histories. warn gets every recording warning; tick, when set, the bytes
// of the stream's files read so far, every 1024 events, for a progress
// display.
func (s *stream) replay(ctx context.Context, cfg apm.Config, ids *apm.IDs, maxEntries int, b *budget, warn func(recording.Warning), tick func(*stream, int64)) error {
	start := time.Now()
	s.h = newHistories(maxEntries, cfg.MaxQPs, b)
	var m *apm.Model
	onLoss := func(l recording.Loss) {
		if m != nil { // the model judges nothing the missing records could change
			m.Lost(l.From, l.To, l.Lost, l.Damaged)
		}
	}
	r, err := recording.OpenWith(recording.ReadOptions{OnLoss: onLoss, OnWarning: func(w recording.Warning) {
		if len(s.res.Warnings) < maxWarnings {
			s.res.Warnings = append(s.res.Warnings, w.String())
		} else {
			s.res.WarningsDropped++
		}
		if warn != nil {
			warn(w)
		}
	}}, s.files...)
	if err != nil {
		return err
	}
	defer r.Close()
	if cfg.MaxPending == 0 || cfg.MaxPending > maxInWindow {
		cfg.MaxPending = maxInWindow
	}
	m, err = apm.New(cfg, func(f apm.Finding) {
		if !take(&b.findings) {
			b.DroppedFindings++
			return
		}
		s.raw = append(s.raw, finding{s, f})
	}, ids)
	if err != nil {
		return err
	}
	for {
		e, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		s.res.Events++
		s.last = max(s.last, e.Boot)
		m.Handle(e)
		h := s.h.observe(s, e)
		s.portAddr(e)
		if e.MAD != nil && e.MAD.MgmtClass == event.MgmtClassCM && len(s.mads) < maxMADs {
			s.mads = append(s.mads, mad{boot: e.Boot, dir: e.MAD.Dir, attr: e.MAD.AttrID, tid: e.MAD.TID,
				local: e.MAD.LocalID, remote: e.MAD.RemoteID, h: h})
		}
		if tick != nil && s.res.Events&1023 == 0 {
			tick(s, r.BytesRead())
		}
	}
	for i := range s.mads { // MADs seen before the call that tied their comm id to a QP
		if d := &s.mads[i]; d.h == nil {
			ours := d.local
			if d.dir == event.MADRecv {
				ours = d.remote
			}
			d.h = s.h.comms[commKey{"", ours}]
		}
	}
	s.endBoot = s.judgedUntil()
	m.Finish(s.endBoot)
	s.res.Stats = r.Stats()
	s.losses = r.Losses()
	s.res.Model = m.Stats()
	s.res.Elapsed = time.Since(start)
	return nil
}

// maxInWindow bounds the events the model holds in its reorder window.
// The model orders each event by walking back from the newest it holds and
// keeps every event of the window: a recording with millions of events
// within one window (real probes deliver a few hundred), or with their
// Boot stamps going backwards, would cost memory and ordering work. Past
// the bound (apm.Config.MaxPending) the model applies the oldest it holds
// at once, and events older than that are taken as late (apm.Stats.Late).
const maxInWindow = 1024

// judgedUntil is the Boot time the recording is known to cover: the file's
// last write (when the writer stopped) when it is after the last event,
// bounded by idleJudged.
func (s *stream) judgedUntil() uint64 {
	end := s.last
	if w := s.mtime.UnixNano() - int64(s.hdr.Meta.BootOffset); w > int64(end) {
		end = min(uint64(w), s.last+uint64(idleJudged))
	}
	return end
}

package audit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/readyfile"
	"github.com/prometheus/client_golang/prometheus"
)

// tickEvery is the loop's clock: the model's deadlines, the actor's Tick,
// counters, the recorder's budget, bundles that are due. Tests shorten it.
var tickEvery = time.Second

// started, when set (tests), sees the daemon once it runs.
var started func(*daemon)

// open is an unresolved finding (open_findings).
type open struct {
	kind apm.Kind
	qp   apm.Key
}

// daemon is the state of one run; only the loop goroutine touches it.
type daemon struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *metrics
	ctx  context.Context

	src          event.Source
	losses       apm.LossWatch // tells the model of the source's losses
	epoch        int
	marked       bool // the current source gives marks: they, not the clock, move the model
	events       chan item
	meta         event.Meta
	counts       counted
	lastStats    event.Stats // of the last source closed
	mods         *modWatch
	attachFailed bool
	blind        string    // the source's event.BlindError, "" when it sees every APM signal
	blindAt      time.Time // when the blind source was attached, for blindRetry

	model *apm.Model
	found []apm.Finding // the model's output of the current call
	flog  *findLog
	rec   *recorder
	recon *reconciler
	open  map[uint64]open

	pending  *bundle       // gathering findings, not yet written
	bundles  chan *bundle  // to the bundle writer
	bundleWG chan struct{} // closed when the bundle writer is done

	lastMods time.Time
	wake     wake // the model's next deadline (wake.go)
}

func (d *daemon) now() time.Time { return d.deps.Now() }

// Run is the daemon: it returns nil after ctx is cancelled and everything is
// flushed, or an error if it cannot start.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	deps.fill()
	if deps.Check != nil {
		if err := deps.Check(); err != nil {
			return err
		}
	}
	d := &daemon{cfg: cfg, deps: deps, ctx: ctx, m: newMetrics(), recon: newReconciler(),
		open: map[uint64]open{}, events: make(chan item, 4096),
		log: slog.New(slog.NewTextHandler(deps.Stderr, nil))}
	if c, ok := cfg.Sink.(prometheus.Collector); ok {
		if err := d.m.reg.Register(c); err != nil {
			return fmt.Errorf("registering the sink's metrics: %w", err)
		}
	}
	if a, ok := cfg.Actor.(interface{ Metrics() prometheus.Collector }); ok {
		if err := d.m.reg.Register(a.Metrics()); err != nil {
			return fmt.Errorf("registering the actor's metrics: %w", err)
		}
	}
	d.deps.Snapshot = scopeSnapshot(cfg.Device, d.deps.Snapshot)
	model, err := apm.New(cfg.Model, func(f apm.Finding) { d.found = append(d.found, f) })
	if err != nil {
		return err
	}
	d.model = model
	var out io.Writer
	if cfg.FindingsToStdout() {
		out = deps.Stdout
	}
	if d.flog, err = newFindLog(cfg.Findings, deps.OpenFile, out, d.m, d.log.Warn); err != nil {
		return err
	}
	defer d.flog.close()
	if cfg.RecorderDir != "" {
		if d.rec, err = newRecorder(cfg.RecorderDir, cfg.RecorderMaxAge, cfg.RecorderMaxBytes, deps.Create, d.m, d.log.Warn); err != nil {
			return err
		}
		d.flog.freeSpace = func() bool { return d.rec.free(d.now()) }
		d.bundles, d.bundleWG = make(chan *bundle, 8), make(chan struct{})
		go d.writeBundles()
	}
	mctx, stopMetrics := context.WithCancel(context.Background())
	defer stopMetrics()
	if cfg.MetricsAddr != "" {
		if err := d.m.serve(mctx, cfg.MetricsAddr, cfg.Profiles, cfg.WebConfig, func(err error) { d.log.Error("metrics server stopped", "err", err) }); err != nil {
			return err
		}
		if cfg.Profiles {
			d.log.Warn("serving Go runtime profiles: any local user can read the daemon's heap and goroutines; turn --pprof off when the diagnosis is done",
				"addr", "http://"+cfg.MetricsAddr+"/debug/pprof/")
		}
	}
	var res restoreResult
	if !cfg.NoRestore {
		res = d.restore(ctx)
	}
	if err := d.attach("start"); err != nil {
		return err
	}
	d.restored(res)
	if cfg.ReadyFile != "" {
		if err := readyfile.Write(cfg.ReadyFile, d.meta); err != nil {
			d.detach()
			return err
		}
	}
	if started != nil {
		started(d)
	}
	d.log.Info("audit running", "findings", cfg.Findings, "metrics", cfg.MetricsAddr, "recorder", cfg.RecorderDir)
	d.loop(ctx)
	d.shutdown()
	return nil
}

func (d *daemon) loop(ctx context.Context) {
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	defer func() {
		for _, t := range []Timer{d.wake.timer, d.wake.actTimer} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	for {
		d.schedule()
		d.scheduleActor()
		select {
		case <-ctx.Done():
			return
		case it := <-d.events:
			d.item(it)
		case <-d.wake.timerC():
			d.woken()
		case <-d.wake.actTimerC():
			d.wake.actAt = time.Time{}
			d.actorTick(d.now())
		case <-d.actorDone():
			d.actorCollect(false)
		case <-tick.C:
			d.tick()
		case <-d.deps.Reopen:
			d.reopen()
		}
	}
}

func (d *daemon) item(it item) {
	if it.ev != nil {
		d.handle(it.ev)
		return
	}
	if it.mark != 0 {
		if it.epoch == d.epoch && d.src != nil {
			d.settle(it.mark)
		}
		return
	}
	if it.epoch != d.epoch || d.src == nil {
		return // the end of a source we closed
	}
	why := "the probes' stream ended"
	if it.err != nil {
		why = it.err.Error()
	}
	d.reattach("source-error", why)
}

// handle takes one event through every output.
func (d *daemon) handle(e *event.Event) {
	d.m.countEvent(e)
	if d.rec != nil {
		d.rec.write(e, d.now())
	}
	if d.cfg.Actor != nil {
		d.cfg.Actor.Observe(e)
	}
	if u := d.recon.observe(e); u != nil {
		d.m.unseenQPs.Inc()
		d.log.Info("qp listed by rdma netlink but never seen by the probes", "device", u.Device, "qpn", u.QPN,
			"mig_state", u.Truth.Mig.String(), "pid", u.PID, "comm", u.Comm)
	}
	if d.cfg.Sink != nil {
		d.cfg.Sink.Observe(e)
	}
	d.model.Handle(e)
	d.publish()
}

func (d *daemon) tick() {
	now := d.now()
	if d.src != nil {
		d.lossTo(d.src.Stats()) // before the model judges and the actor runs what it planned
	}
	d.advance()
	d.publish()
	d.actorTick(now)
	if d.src != nil {
		s := d.src.Stats()
		d.m.addStats(&d.counts, s)
		if d.rec != nil {
			d.rec.writeStats(s, now)
		}
	}
	d.m.modelQPs.Set(float64(d.model.Stats().QPs))
	d.sweepOpen()
	if d.cfg.Sink != nil {
		d.cfg.Sink.Tick(now)
	}
	if d.rec != nil {
		d.rec.tick(now)
	}
	d.flog.flush()
	if d.pending != nil && !now.Before(d.pending.due) {
		d.dispatchBundle()
	}
	if d.cfg.ModuleCheck > 0 && now.Sub(d.lastMods) >= d.cfg.ModuleCheck {
		d.lastMods = now
		d.checkModules()
	}
}

// lossTo tells the actor of events lost since the counters were last
// added (d.counts).
func (d *daemon) lossTo(s event.Stats) {
	d.losses.Check(d.model, s)
	if lt, ok := d.cfg.Actor.(LossTaker); ok && s.Dropped() > d.counts.lost {
		lt.Lost(s.At)
	}
}

func (d *daemon) checkModules() {
	if d.src == nil {
		d.reattach("retry", "the probes are not attached")
		return
	}
	if d.blind != "" && d.now().Sub(d.blindAt) >= blindRetry {
		d.reattach("retry", d.blind)
		return
	}
	if what := d.mods.changed(); what != "" {
		d.reattach("modules", what)
	}
}

func (d *daemon) reopen() {
	if err := d.flog.reopen(); err != nil {
		d.log.Error("SIGHUP: reopening the finding log failed", "err", err)
		return
	}
	d.log.Info("SIGHUP: finding log reopened", "file", d.cfg.Findings)
}

// shutdown detaches the probes, takes in what they delivered, judges what
// is due, writes the pending bundle and closes every file.
func (d *daemon) shutdown() {
	d.detach()
	deadline := time.After(3 * time.Second)
drain:
	for {
		select {
		case it := <-d.events:
			if it.ev == nil && it.mark == 0 && it.epoch == d.epoch {
				break drain
			}
			if it.ev != nil {
				d.handle(it.ev)
			}
		case <-deadline:
			d.log.Warn("the probes did not end in 3s: events still queued are not judged")
			break drain
		}
	}
	d.model.Finish(d.deps.Boot())
	d.publish()
	d.actorCollect(true)
	if d.cfg.Sink != nil {
		d.cfg.Sink.Tick(d.now())
	}
	if d.pending != nil {
		d.dispatchBundle()
	}
	if d.bundles != nil {
		close(d.bundles)
		select {
		case <-d.bundleWG:
		case <-time.After(30 * time.Second):
			d.log.Warn("the last bundle was not written in 30s")
		}
	}
	if d.rec != nil {
		d.rec.writeStats(d.lastStats, d.now())
		d.rec.stop()
	}
	st := d.model.Stats()
	d.log.Info("audit stopped", "events", st.Events, "qps", st.QPs, "lost", d.counts.lost, "findings", sum(st.Findings))
}

func sum(m map[apm.Kind]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/readyfile"
	"github.com/apmwatch/apmwatch/output"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/recording"
)

// statsEvery is how often the source's counters go into the file while
// events flow, so a recording cut by kill -9 still says what was lost.
const statsEvery = time.Second

// Config is everything `apmwatch record` takes from its flags.
type Config struct {
	Path      string
	Filter    output.Filter
	Duration  time.Duration // 0: until ctx is done
	ReadyFile string        // written (Meta as JSON) once the file is open and probes attached
	Options   recording.Options
	Reconcile time.Duration // record rdma netlink readings this often; 0: never
}

// Deps are the record command's connections to the system.
type Deps struct {
	Open     func() (event.Source, error)
	Snapshot func() (rdmanl.Snapshot, error) // ground truth (rdmanl.Read)
	Check    func() error                    // privileges, RDMA present
	Stderr   io.Writer                       // the closing summary and warnings
}

// Result says what a session wrote.
type Result struct {
	Seen, Kept uint64
	Stats      event.Stats
	Files      []string
}

// Record copies the events that cfg.Filter keeps from the source into a new
// recording until ctx is done, the duration passes or the source ends.
func Record(ctx context.Context, cfg Config, d Deps) (Result, error) {
	if cfg.Path == "" {
		return Result{}, errors.New("no recording file: give -w FILE")
	}
	if d.Check != nil {
		if err := d.Check(); err != nil {
			return Result{}, err
		}
	}
	src, err := withTruth(seeing(d.Open), d.Snapshot, cfg.Reconcile, d.Stderr)()
	if err != nil {
		return Result{}, err
	}
	defer src.Close()
	w, err := recording.Create(cfg.Path, src.Meta(), cfg.Options)
	if err != nil {
		return Result{}, err
	}
	if cfg.ReadyFile != "" {
		if err := readyfile.Write(cfg.ReadyFile, src.Meta()); err != nil {
			w.Close()
			return Result{}, err
		}
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	var res Result
	rec := &copier{w: w, filter: cfg.Filter, res: &res, src: src}
	err = rec.pump(ctx)
	src.Close() // detach the probes, then drain what they delivered
	if err == nil {
		err = rec.pump(context.Background())
	}
	res.Stats = src.Stats()
	err = errors.Join(err, rec.finish(res.Stats))
	res.Files = w.Files()
	if d.Stderr != nil {
		printResult(d.Stderr, res)
	}
	return res, err
}

type copier struct {
	w         *recording.Writer
	src       event.Source
	filter    output.Filter
	res       *Result
	lastStats time.Time
}

// pump copies events until the source ends or ctx is done (both normal).
func (c *copier) pump(ctx context.Context) error {
	for {
		e, err := c.src.Next(ctx)
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil
		case err != nil:
			return err
		}
		c.res.Seen++
		if !c.filter.Match(e) {
			continue
		}
		c.res.Kept++
		if err := c.w.Write(e); err != nil {
			return fmt.Errorf("writing the recording: %w", err)
		}
		if now := time.Now(); now.Sub(c.lastStats) >= statsEvery {
			c.lastStats = now
			if err := c.w.WriteStats(c.src.Stats()); err != nil {
				return fmt.Errorf("writing the recording: %w", err)
			}
		}
	}
}

// finish writes the final counters and closes the file.
func (c *copier) finish(s event.Stats) error {
	err := c.w.WriteStats(s)
	if cerr := c.w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("closing the recording: %w", err)
	}
	return nil
}

func printResult(w io.Writer, r Result) {
	fmt.Fprintf(w, "recorded %d of %d events to %v; lost %d, missed %d, decode errors %d\n",
		r.Kept, r.Seen, r.Files, r.Stats.Lost, r.Stats.Missed, r.Stats.DecodeErrs)
}

// Package hcacheck is `apmwatch hca-check`: it asks the user's own HCA the
// questions about path migration that no driver source answers (ConnectX
// firmware decides them) and that the lab's simulated HCA has a knob for.
// It makes its own loopback RC pair on one device (QP A and QP B, both with
// their primary path on --port and the alternate on --alt-port), arms it,
// drives each point, reports what the device answered with the errno,
// async events and QUERY_QP readings seen, and destroys everything it made.
// It touches no other QP.
//
// Files: check.go (Config, Run, Check, the steps and their order), pair.go
// (making and destroying the loopback pair), ops.go (the checker's
// operations on the pair: modify, query, send, events and completions,
// wait, arm), points_modify.go (the points a PATH_MIG_STATE modify
// answers), points_migrate.go (the forced migration and the points after
// it, the dead alternate), decide.go (from what was seen to each point's
// answer), report.go (the report), sysfs.go (the device and its ports),
// backend.go (what the check needs from a verbs stack), raw.go (the raw
// uverbs backend).
package hcacheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apmwatch/apmwatch/internal/uverbs"
)

// Config is one check.
type Config struct {
	Device  string
	Port    uint8 // the primary path's port
	AltPort uint8 // the alternate's port; equal to Port: an LMC path on it (or, with LMC 0, the same path)
	// DeadLID is the DLID of the dead alternate (a LID no port answers).
	DeadLID uint16
	// Timeout and RetryCnt are the QPs' local ACK timeout exponent (4.096
	// us << Timeout per try; also the alternate's) and retry count: small,
	// so that the dead-alternate point's retries run out fast.
	Timeout, RetryCnt uint8
	ArmWait           time.Duration // for both QPs to read ARMED after their sends
	EventWait         time.Duration // for an async event that is expected, or for "after"
	FailWait          time.Duration // for the dead-alternate point's retries to run out
}

// DefaultConfig: ports 1 and 2; timeout 12 (16.8 ms per try) and retry_cnt
// 3 (4 tries: 67 ms per path, well under a second for both paths).
func DefaultConfig() Config {
	return Config{Port: 1, AltPort: 2, DeadLID: 0xbfff, Timeout: 12, RetryCnt: 3,
		ArmWait: 5 * time.Second, EventWait: time.Second, FailWait: 3 * time.Second}
}

// Validate checks the values a flag can get wrong.
func (c *Config) Validate() error {
	if err := CheckDeviceName(c.Device); err != nil {
		return err
	}
	switch {
	case c.Port == 0 || c.AltPort == 0:
		return errors.New("--port and --alt-port must be 1 to 255")
	case c.DeadLID == 0 || c.DeadLID >= 0xc000:
		return fmt.Errorf("--dead-lid %d is no unicast LID (1 to 49151)", c.DeadLID)
	case c.Timeout == 0 || c.Timeout > 31:
		return fmt.Errorf("--timeout %d: want 1 to 31 (0 would wait for ever)", c.Timeout)
	case c.RetryCnt > 7:
		return fmt.Errorf("--retry-cnt %d: want 0 to 7", c.RetryCnt)
	case c.ArmWait <= 0 || c.EventWait <= 0 || c.FailWait <= 0:
		return errors.New("the waits must be positive")
	}
	return nil
}

// Deps are what Run uses from the host.
type Deps struct {
	Sys     string         // the sysfs root ("/sys")
	Backend func() Backend // nil: the raw uverbs backend on /dev
	Stdout  io.Writer
	Wide    bool // the report's table in full (-o wide), not cut to 80 columns
}

// Run checks the device and prints the report (also the part done before
// an error or an interrupt, then the error).
func Run(ctx context.Context, cfg Config, asJSON bool, d Deps) error {
	rep, err := Check(ctx, cfg, d)
	if rep != nil {
		write := func() error { return rep.Write(d.Stdout, asJSON) }
		if d.Wide && !asJSON {
			write = func() error { return rep.WriteWide(d.Stdout) }
		}
		if werr := write(); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// Check runs every point on the device. The report is nil when the device
// was refused; otherwise it holds every point driven before an error.
// Whatever was made is destroyed before it returns.
func Check(ctx context.Context, cfg Config, d Deps) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Sys == "" {
		d.Sys = "/sys"
	}
	ports := []uint8{cfg.Port}
	if cfg.AltPort != cfg.Port {
		ports = append(ports, cfg.AltPort)
	}
	info, err := inspect(d.Sys, cfg.Device, ports...)
	if err != nil {
		return nil, err
	}
	c := &checker{cfg: cfg, info: info, rep: &Report{Device: cfg.Device, Port: cfg.Port, AltPort: cfg.AltPort,
		Driver: info.Driver, Knobs: map[string]string{}}}
	if err := c.paths(); err != nil {
		return nil, err
	}
	if d.Backend != nil {
		c.b = d.Backend()
	} else {
		c.b = NewRaw(d.Sys, "/dev")
	}
	if err := c.b.Open(cfg.Device); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", cfg.Device, err), c.b.Close())
	}
	defer func() {
		if terr := c.teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
		slices.SortStableFunc(c.rep.Points, func(x, y Point) int { return order(x.Point) - order(y.Point) })
		c.rep.Knobs = knobs(c.rep.Points)
	}()
	return c.rep, c.run(ctx)
}

// pointOrder is the order of the report: the order of the list.
var pointOrder = []string{PtArmedModify, PtRearmOnArmed, PtMigFromRearm, PtForcedEvent, PtResponderEv,
	PtAltAfterMig, PtCommEstAfter, PtOneWayArm, PtDeadAlt, PtUnloadedAlt}

func order(p string) int { return slices.Index(pointOrder, p) }

type checker struct {
	cfg    Config
	info   deviceInfo
	b      Backend
	rep    *Report
	pd, cq uint32
	havePD bool
	haveCQ bool
	made   []*qp
	a, bq  *qp
	prim   path // the primary path of both QPs at setup
	alt    path // their alternate at setup
	events []seen
	wcs    []uverbs.WC
	wrID   uint64
	migAt  int // index in events of the forced migration
}

// paths works out the primary and alternate paths and says how.
func (c *checker) paths() error {
	p, q := c.info.Ports[c.cfg.Port], c.info.Ports[c.cfg.AltPort]
	c.prim = path{Port: c.cfg.Port, DLID: p.LID}
	c.alt = path{Port: c.cfg.AltPort, DLID: q.LID}
	if c.cfg.AltPort == c.cfg.Port {
		if p.LMC > 0 {
			c.alt = path{Port: c.cfg.Port, DLID: p.LID + 1, Bits: 1}
			c.note("the alternate is the LMC path of port %d (DLID %d, source path bits 1)", c.cfg.Port, p.LID+1)
		} else {
			c.note("the alternate is the primary's own path (port %d has LMC 0): alt-after-migration cannot tell a copy from a swap, and a real path failure would take both", c.cfg.Port)
		}
	}
	for port, pi := range c.info.Ports {
		if c.cfg.DeadLID >= pi.LID && uint32(c.cfg.DeadLID) < uint32(pi.LID)+1<<pi.LMC {
			return fmt.Errorf("--dead-lid %d is a LID of %s port %d: pick one no port answers", c.cfg.DeadLID, c.cfg.Device, port)
		}
	}
	c.note("both QPs use timeout %d (%.1f ms per try) and retry_cnt %d (%d tries per path), so a dead path is noticed in %.0f ms",
		c.cfg.Timeout, tryMs(c.cfg.Timeout), c.cfg.RetryCnt, int(c.cfg.RetryCnt)+1, tryMs(c.cfg.Timeout)*float64(int(c.cfg.RetryCnt)+1))
	return nil
}

func tryMs(timeout uint8) float64 { return 4.096e-3 * float64(uint64(1)<<timeout) }

func (c *checker) note(format string, args ...any) {
	c.rep.Notes = append(c.rep.Notes, fmt.Sprintf(format, args...))
}

func (c *checker) add(p Point) { c.rep.Points = append(c.rep.Points, p) }

// step is a part of the check and the points it answers.
type step struct {
	points []string
	run    func(context.Context) error
}

func (c *checker) run(ctx context.Context) error {
	steps := []step{
		{[]string{PtUnloadedAlt}, c.setup},
		{[]string{PtArmedModify}, c.armedModify},
		{nil, func(ctx context.Context) error { return c.arm(ctx, "at setup", c.a, c.bq) }},
		{[]string{PtRearmOnArmed}, c.rearmOnArmed},
		{[]string{PtForcedEvent, PtAltAfterMig, PtResponderEv}, c.forced},
		{[]string{PtMigFromRearm}, c.migratedFromRearm},
		{[]string{PtOneWayArm, PtCommEstAfter}, c.oneWay},
		{[]string{PtDeadAlt}, c.deadAlt},
	}
	for i, s := range steps {
		if err := ctx.Err(); err != nil {
			return c.abandon(steps[i:], fmt.Errorf("interrupted: %w", err))
		}
		if err := s.run(ctx); err != nil {
			return c.abandon(steps[i:], err)
		}
	}
	return nil
}

// abandon marks the points of the steps left (and of the one that failed,
// if it did not answer them) as not run.
func (c *checker) abandon(left []step, err error) error {
	for _, s := range left {
		for _, p := range s.points {
			if !slices.ContainsFunc(c.rep.Points, func(x Point) bool { return x.Point == p }) {
				c.add(Point{Point: p, Answer: AnsNotRun, Detail: err.Error()})
			}
		}
	}
	return err
}

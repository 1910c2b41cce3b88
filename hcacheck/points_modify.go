package hcacheck

import (
	"context"
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// The points a PATH_MIG_STATE modify answers with its errno: ARMED on
// MIGRATED, REARM on ARMED, MIGRATED on REARM.

// armedModify: PATH_MIG_STATE=ARMED on A, which is MIGRATED (a QP's state
// after INIT) with its alternate loaded.
func (c *checker) armedModify(context.Context) error {
	before, err := c.mig(c.a)
	if err != nil {
		return err
	}
	merr := c.setMig(c.a, event.MigArmed)
	after, err := c.mig(c.a)
	if err != nil {
		return err
	}
	p := Point{Point: PtArmedModify, Answer: decideModify(merr), Errno: errnoName(merr),
		Detail: fmt.Sprintf("A was %s; reads %s after", before, after)}
	if merr == nil && after != event.MigArmed {
		p.Detail += " (accepted, yet not ARMED)"
	}
	c.add(p)
	return nil
}

// rearmOnArmed: REARM on A, ARMED.
func (c *checker) rearmOnArmed(ctx context.Context) error {
	merr := c.setMig(c.a, event.MigRearm)
	after, err := c.mig(c.a)
	if err != nil {
		return err
	}
	c.add(Point{Point: PtRearmOnArmed, Answer: decideModify(merr), Errno: errnoName(merr),
		Detail: fmt.Sprintf("A was ARMED; reads %s after", after)})
	if after != event.MigArmed {
		return c.arm(ctx, "after the REARM on ARMED", c.a)
	}
	return nil
}

// migratedFromRearm: A (MIGRATED) gets a new alternate, its old primary's
// path, and REARM; B sends nothing, so A stays REARM; then MIGRATED on it.
func (c *checker) migratedFromRearm(context.Context) error {
	if err := c.loadAlt(c.a, c.prim); err != nil {
		return fmt.Errorf("QP A: loading a new alternate after the migration: %w", err)
	}
	if err := c.setMig(c.a, event.MigRearm); err != nil {
		return fmt.Errorf("REARM on QP A after the migration: %w", err)
	}
	before, err := c.mig(c.a)
	if err != nil {
		return err
	}
	if before != event.MigRearm {
		c.add(Point{Point: PtMigFromRearm, Answer: AnsNotRun,
			Detail: fmt.Sprintf("A reads %s after its REARM, not REARM", before)})
		return nil
	}
	merr := c.setMig(c.a, event.MigMigrated)
	after, err := c.mig(c.a)
	if err != nil {
		return err
	}
	c.add(Point{Point: PtMigFromRearm, Answer: decideModify(merr), Errno: errnoName(merr),
		Detail: fmt.Sprintf("A was REARM; reads %s after", after)})
	return nil
}

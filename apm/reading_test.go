package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

func TestTruthEvents(t *testing.T) {
	var got []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	read := func(sec uint64, qpn uint32, typ event.QPType, cm bool) {
		m.Handle(&event.Event{Kind: event.KindTruth, Boot: sec * uint64(time.Second), Device: "mlx5_0", QPN: qpn,
			PID: 4242, Comm: "ib_write_bw", Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: typ,
				State: event.StateRTS, HasState: true, Mig: event.MigRearm, CM: cm}})
	}
	for s := range uint64(12) {
		read(s+1, 100, event.QPTypeRC, true)
		read(s+1, 101, event.QPTypeUD, false)
	}
	m.Finish(12 * uint64(time.Second))
	if v, ok := m.Lookup("mlx5_0", 100); !ok || !v.CM || v.PID != 4242 || v.Comm != "ib_write_bw" || v.Mig != event.MigRearm {
		t.Fatalf("QP 100 %+v %v: want CM-managed, owned by ib_write_bw:4242, REARM", v, ok)
	}
	if _, ok := m.Lookup("mlx5_0", 101); ok {
		t.Error("a UD QP's reading made a history")
	}
	if len(got) != 1 || got[0].Kind != apm.StuckRearm || got[0].PID != 4242 || got[0].Comm != "ib_write_bw" {
		t.Fatalf("findings %v: want one stuck-rearm naming the owner from the reading", got)
	}
	m.Handle(&event.Event{Kind: event.KindTruth, Boot: 13 * uint64(time.Second), Device: "mlx5_0", QPN: 100,
		Truth: &event.Truth{Op: event.TruthGone, Source: "netlink"}})
	m.Finish(13 * uint64(time.Second))
	if _, ok := m.Lookup("mlx5_0", 100); ok || m.Stats().QPs != 0 {
		t.Errorf("QP 100 still tracked after it vanished from the table (%d QPs)", m.Stats().QPs)
	}
	if s := m.Stats(); s.Truths != 12 || s.Events != 25 {
		t.Errorf("stats %+v: want 12 readings applied of 25 inputs", s)
	}
}

// Readings from older recorders carry no span: such a row may have been
// read anywhere since the previous reading, so it cannot show a state
// after an event in between; a reading with its span can.
func TestReadingWithoutSpan(t *testing.T) {
	for _, tc := range []struct {
		name string
		span uint64
		want []apm.Kind
	}{
		{"with its span: ARMED after the PATH_MIG is a mismatch", uint64(time.Microsecond), []apm.Kind{apm.MissedRearm, apm.MigStateMismatch}},
		{"without a span (an older recorder): it may predate the PATH_MIG", 0, []apm.Kind{apm.MissedRearm}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			armedQP(b)
			b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS).Truth.Span = tc.span
			b.After(time.Second).PathMig(qpn)
			b.After(500*time.Millisecond).Truth(qpn, event.MigArmed, event.StateRTS).Truth.Span = tc.span
			got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
			if err != nil {
				t.Fatal(err)
			}
			checkKinds(t, got, tc.want, nil)
		})
	}
}

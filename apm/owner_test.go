package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// A finding names the process whose QP it is, not whoever touched the QP
// last: here a maintenance tool forces the migration, and the owner never
// rearms. The owner must fix it, so the owner is named.
func TestFindingNamesTheOwnerNotTheLastToucher(t *testing.T) {
	b := apmtest.New() // the owner: pid 4242, "apmapp"
	b.Create(qpn)
	b.Connect(qpn, event.Path{Port: 1, DLID: 1}, &event.Path{Port: 2, DLID: 2})
	b.PID, b.Comm = 999, "apmtool"
	b.After(time.Millisecond).ForceMigrate(qpn)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, got, []apm.Kind{apm.MissedRearm}, nil)
	for _, f := range got {
		if f.PID != 4242 || f.Comm != "apmapp" {
			t.Errorf("%s names %s:%d, want the owner apmapp:4242", f.Kind, f.Comm, f.PID)
		}
	}
}

// The kernel's record (rdma netlink) of the owner wins over a guess from
// events when the create was not seen.
func TestNetlinkNamesTheOwner(t *testing.T) {
	b := apmtest.New()
	b.PID, b.Comm = 999, "apmtool" // first seen through someone else's modify
	b.Connect(qpn, event.Path{Port: 1, DLID: 1}, &event.Path{Port: 2, DLID: 2})
	tr := b.Truth(qpn, event.MigArmed, event.StateRTS)
	tr.PID, tr.Comm = 4242, "apmapp"
	b.After(time.Millisecond).ForceMigrate(qpn)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no finding")
	}
	for _, f := range got {
		if f.PID != 4242 || f.Comm != "apmapp" {
			t.Errorf("%s names %s:%d, want the owner from netlink apmapp:4242", f.Kind, f.Comm, f.PID)
		}
	}
}

package actuator

import (
	"errors"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// The handle the QP had now names another QP of the owner (the kernel
// reuses handle ids): its query disagrees with netlink's row of the QPN,
// nothing is sent.
func TestHandleReusedNothingSent(t *testing.T) {
	a, b, tg, f, _ := setup(t, event.MigMigrated, "InfiniBand")
	f.attr.DestQPN = 99 // the new QP behind handle 2
	err := a.act(&Request{Op: OpRearm}, b, tg, &Result{})
	if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "handle ids are reused") || len(f.modifies) != 0 {
		t.Fatalf("reused handle: %v, %d modifies", err, len(f.modifies))
	}
}

// rdma netlink is read again after the check: a QP no longer listed, or
// listed for another owner, is not touched.
func TestNetlinkRereadBeforeSending(t *testing.T) {
	for name, rows := range map[string]func(f *fakeQP) []rdmanl.QP{
		"no longer listed": func(*fakeQP) []rdmanl.QP { return nil },
		"another owner": func(f *fakeQP) []rdmanl.QP {
			r := f.row()
			r.PID = 43
			return []rdmanl.QP{r}
		},
		"another remote": func(f *fakeQP) []rdmanl.QP {
			r := f.row()
			r.RQPN = 5
			return []rdmanl.QP{r}
		},
	} {
		a, b, tg, f, _ := setup(t, event.MigMigrated, "InfiniBand")
		f.rows = func() []rdmanl.QP { return rows(f) }
		err := a.act(&Request{Op: OpRearm}, b, tg, &Result{})
		if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "before:") || len(f.modifies) != 0 {
			t.Errorf("%s: %v, %d modifies", name, err, len(f.modifies))
		}
	}
	// Netlink and the handle disagree on the mig state: changed meanwhile.
	a, b, tg, f, _ := setup(t, event.MigMigrated, "InfiniBand")
	f.rows = func() []rdmanl.QP {
		r := f.row()
		r.PathMig = event.MigArmed
		return []rdmanl.QP{r}
	}
	if err := a.act(&Request{Op: OpRearm}, b, tg, &Result{}); !errors.Is(err, ErrWrongState) || len(f.modifies) != 0 {
		t.Errorf("mig differs: %v, %d modifies", err, len(f.modifies))
	}
}

// The change is verified by QPN through rdma netlink, not only through the
// handle.
func TestVerifiedThroughNetlink(t *testing.T) {
	a, b, tg, f, _ := setup(t, event.MigMigrated, "InfiniBand")
	f.rows = func() []rdmanl.QP {
		r := f.row()
		if len(f.modifies) > 0 {
			r.PathMig = event.MigMigrated // netlink's QPN did not change
		}
		return []rdmanl.QP{r}
	}
	err := a.act(&Request{Op: OpRearm}, b, tg, &Result{})
	if !errors.Is(err, ErrWrongState) || !strings.Contains(err.Error(), "rdma netlink reads qp 17 as MIGRATED after rearm") {
		t.Fatalf("netlink disagrees after: %v", err)
	}
	a, b, tg, f, _ = setup(t, event.MigMigrated, "InfiniBand")
	f.rows = func() []rdmanl.QP {
		if len(f.modifies) > 0 {
			return nil
		}
		return []rdmanl.QP{f.row()}
	}
	if err := a.act(&Request{Op: OpRearm}, b, tg, &Result{}); !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "verifying: qp gone: after:") {
		t.Fatalf("gone after: %v", err)
	}
}

// A migrated InfiniBand QP runs on its old alternate's port, copied into
// both paths, while rdma netlink still shows the port software set
// (ib_core's qp->port): the handle still names it, and the port only
// breaks ties between candidates.
func TestSamePortAfterMigration(t *testing.T) {
	migrated := Attr{PortNum: 2, AltPortNum: 2, DestQPN: 7, State: uint8(event.StateRTS)}
	row := rdmanl.QP{Port: 1, RQPN: 7, HasRemote: true, State: event.StateRTS}
	if why := sameQP(migrated, row); why != "" {
		t.Errorf("a migrated QP against netlink's port 1: %q, want the same QP", why)
	}
	for port, want := range map[uint32]bool{0: true, 1: false, 2: true} {
		if got := samePort(migrated, port); got != want {
			t.Errorf("samePort(port 2 alt 2, netlink %d) = %v, want %v", port, got, want)
		}
	}
	other := Attr{PortNum: 1, AltPortNum: 2, DestQPN: 7, State: uint8(event.StateRTS)}
	cs := []candidate{{handle: 3, attr: migrated}, {handle: 4, attr: other}}
	if got := matchRow(cs, row); len(got) != 1 || got[0].handle != 4 {
		t.Errorf("two candidates, one on netlink's port: %v, want handle 4", got)
	}
	if got := matchRow(cs[:1], row); len(got) != 1 || got[0].handle != 3 {
		t.Errorf("the migrated QP alone: %v, want handle 3", got)
	}
}

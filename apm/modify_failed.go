package apm

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/apmwatch/apmwatch/event"
)

// apm-modify-failed: the kernel refused a modify that touches APM
// attributes (an alternate-path load, a rearm, a forced migration). Once
// per class and errno per generation. A refused alternate load stays in the
// episode as evidence (missed-rearm, rearm-without-new-alternate); outside
// an episode, an InfiniBand alternate (it names a DLID: on RoCE APM cannot
// work at all) refused on a QP known to have no armed alternate (it reads
// MIGRATED) leaves the QP unprotected: the cause of an unprotected-failure
// if the QP then dies on a path failure, until a load and rearm succeed.

// Classes of refused APM modifies, for the hint and the dedupe.
const (
	clsAlt uint64 = iota + 1
	clsRearm
	clsAltRearm
	clsForce
	clsOther
)

func (m *Model) modifyFailed(q *qp, ev *event.Event) {
	md := ev.Modify
	alt, pms := md.Has(event.AttrAltPath), md.Has(event.AttrPathMigState)
	if !alt && !pms {
		return
	}
	cls, what := clsOther, "path-migration-state modify"
	switch {
	case alt && pms && md.MigState == event.MigRearm:
		cls, what = clsAltRearm, "alternate-path load with rearm"
	case alt:
		cls, what = clsAlt, "alternate-path load"
	case md.MigState == event.MigRearm:
		cls, what = clsRearm, "rearm"
	case md.MigState == event.MigMigrated:
		cls, what = clsForce, "forced migration"
	}
	x := q.ax()
	if ep := x.ep; alt && ep != nil && !ep.rearm.ok() && ep.altFailed == 0 && ev.Boot >= ep.mig.boot {
		ep.altFailed = md.Ret
	}
	d := cls<<32 | uint64(uint32(md.Ret))
	for _, v := range x.failedDedup {
		if v == d {
			return
		}
	}
	if len(x.failedDedup) < 8 {
		x.failedDedup = append(x.failedDedup, d)
	}
	errno := -md.Ret
	expl := fmt.Sprintf("the kernel refused the %s with errno %d (%s)", what, errno, errnoName(errno))
	hint := failHint(cls, errno)
	if md.RefusedByUverbs() {
		expl += "; ib_uverbs refused the command itself: it never reached the verbs layer or the device"
		if alt && md.Alt != nil && md.AltAHPort != md.Alt.Port {
			expl += fmt.Sprintf(" (the alternate's address vector names port %d, alt_port_num %d: ib_uverbs requires them equal)",
				md.AltAHPort, md.Alt.Port)
			hint = uverbsAltPortHint
		}
	}
	id := m.emit(q, Finding{Kind: APMModifyFailed, Errno: errno,
		Evidence:    []Evidence{evd(refOf(ev), what+" refused by "+md.Hook)},
		Explanation: expl,
		Remediation: hint})
	if alt && md.Alt != nil && md.Alt.DLID != 0 && x.ep == nil && q.flags&fMigKnown != 0 && q.mig == event.MigMigrated {
		m.markUnprotected(q, ev.Boot, id, APMModifyFailed)
		m.markIdle(q, id) // nothing shows traffic: only a reading in ERR shows a loss
	}
}

// uverbsAltPortHint: ib_uverbs' modify_qp (uverbs_cmd.c) refuses
// IB_QP_ALT_PATH unless alt_port_num and alt_ah_attr.port_num are valid and
// equal; an attribute set taken from ibv_query_qp on a QP without an
// alternate has alt_ah_attr.port_num 0.
const uverbsAltPortHint = "set alt_ah_attr.port_num to the same port as alt_port_num (ibv_query_qp on a QP without an alternate leaves it 0), then load the alternate again and rearm"

// errnoName names an errno the Linux way (EINVAL), from x/sys.
func errnoName(e int32) string {
	if n := unix.ErrnoName(syscall.Errno(e)); n != "" {
		return n
	}
	return "errno " + itoa(uint64(uint32(e)))
}

func failHint(cls uint64, errno int32) string {
	switch {
	case errno == 22 && (cls == clsAlt || cls == clsAltRearm):
		return "EINVAL on an alternate path: on a RoCE (Ethernet) port the core refuses IB_QP_ALT_PATH, APM is InfiniBand-only; on InfiniBand check alt_port_num (and that alt_ah_attr.port_num equals it: ib_uverbs refuses it otherwise), alt_pkey_index, alt_timeout and alt_ah_attr (and that the transition is RTR->RTS, RTS->RTS or earlier), then load the new alternate and rearm"
	case errno == 22 && cls == clsRearm:
		return "EINVAL on a rearm: REARM is taken only from MIGRATED into RTS (rdmavt refuses it on a QP that is ARMED or arming: it is armed already, and a rearm after loading a new alternate is not needed there); PATH_MIG_STATE is accepted on RTR->RTS, RTS->RTS and SQD->RTS"
	case errno == 22 && cls == clsForce:
		return "EINVAL on a forced migration: MIGRATED is taken only from ARMED into RTS (rdmavt refuses it from REARM: the peer has not armed yet)"
	case errno == 22:
		return "EINVAL on PATH_MIG_STATE: it is accepted only on RTR->RTS, RTS->RTS and SQD->RTS, and only REARM (from MIGRATED) or MIGRATED (from ARMED) may be written: IBTA and rdmavt refuse ARMED"
	case errno == 95:
		return "EOPNOTSUPP: the device does not support APM (ibv_devinfo -v shows AUTO_PATH_MIG when it does)"
	}
	return "retry the steps in order: " + stepsRemedy
}

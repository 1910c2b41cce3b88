package apm

import (
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// ev names an evidence item.
func evd(r ref, what string) Evidence { return Evidence{Seq: r.seq, Boot: r.boot, What: what} }

// emit fills the common fields of f and hands it to the sink.
func (m *Model) emit(q *qp, f Finding) uint64 {
	m.ids++
	f.ID = m.ids
	f.QP = m.keyView(q)
	f.PID = q.pid
	f.Comm = m.comms.name(q.comm)
	if f.First == 0 && len(f.Evidence) > 0 {
		f.First = f.Evidence[0].Boot
	}
	if f.Last == 0 {
		f.Last = m.now
	}
	if m.wall != 0 {
		f.FirstTime = time.Unix(0, int64(f.First)+int64(m.wall))
		f.LastTime = time.Unix(0, int64(f.Last)+int64(m.wall))
	}
	if f.Resolved {
		m.stats.Resolutions++
	} else {
		m.stats.Findings[f.Kind]++
	}
	m.sink(f)
	return f.ID
}

func since(a, b uint64) time.Duration {
	if b < a {
		return 0
	}
	return time.Duration(b - a).Round(time.Millisecond)
}

func migWhat(ep *episode) string {
	if ep.forced {
		return "forced migration (modify PATH_MIG_STATE=MIGRATED)"
	}
	return "PATH_MIG"
}

func (m *Model) rearmNoAlt(q *qp, ep *episode, ev *event.Event) {
	if ep.done&dNoAlt != 0 {
		return
	}
	ep.done |= dNoAlt
	f := Finding{Kind: RearmWithoutAlt, Severity: SevWarning, Remediation: remedyNewAlt,
		Evidence: []Evidence{evd(ep.mig, migWhat(ep))}}
	switch {
	case ep.altLoad.ok():
		f.Evidence = append(f.Evidence, evd(ep.altLoad, "alternate load onto the current primary ("+q.primary.String()+")"))
		f.Explanation = fmt.Sprintf("migration %d was rearmed with an alternate path equal to the primary it runs on (%s), so the QP is armed with nowhere to fail over to", ep.n, q.primary)
	case ep.altFailed != 0:
		f.Explanation = fmt.Sprintf("migration %d was rearmed although the alternate-path load in this episode failed (errno %d), so the QP is armed with no valid alternate", ep.n, -ep.altFailed)
	default:
		f.Explanation = fmt.Sprintf("migration %d was rearmed without loading a new alternate path first, so the QP is armed onto a stale or invalid alternate (no error is raised for that)", ep.n)
	}
	f.Evidence = append(f.Evidence, evd(refOf(ev), "rearm"))
	m.emit(q, f)
}

func (m *Model) resolveMissed(q *qp, ep *episode, ev *event.Event) {
	d := time.Duration(ev.Boot - ep.mig.boot)
	m.emit(q, Finding{Kind: MissedRearm, Severity: SevInfo, Resolved: true, Resolves: ep.missedID,
		Unprotected: d, First: ep.mig.boot, Last: ev.Boot,
		Evidence:    []Evidence{evd(ep.mig, migWhat(ep)), evd(refOf(ev), "rearm")},
		Explanation: fmt.Sprintf("migration %d was finally rearmed after %v: the QP ran unprotected for that long", ep.n, since(ep.mig.boot, ev.Boot)),
		Remediation: remedyRearm})
}

func (m *Model) lapWindow(q *qp, ep *episode, r ref, what string) {
	if ep.done&dLapWindow != 0 {
		return
	}
	ep.done |= dLapWindow
	m.emit(q, Finding{Kind: LAPRace, Severity: SevError, Remediation: remedyLAP,
		Evidence:    []Evidence{evd(ep.mig, migWhat(ep)), evd(ep.commEst, "COMM_EST on the migrated path"), evd(r, what)},
		Explanation: fmt.Sprintf("%s %v after COMM_EST on the migrated path, outside the window from the migration to COMM_EST, so the LAP cannot reach the remote node in time", what, since(ep.commEst.boot, r.boot))})
}

func (m *Model) lapOrder(q *qp, ep *episode, ev *event.Event) {
	if ep.done&dLapOrder != 0 {
		return
	}
	ep.done |= dLapOrder
	m.emit(q, Finding{Kind: LAPRace, Severity: SevError, Remediation: remedyLAP,
		Evidence:    []Evidence{evd(ep.mig, migWhat(ep)), evd(ep.rearm, "rearm"), evd(refOf(ev), "alternate load")},
		Explanation: fmt.Sprintf("the rearm came %v before the new alternate path was loaded in migration %d (steps 2 and 3 swapped): in between the QP could arm onto the stale alternate", since(ep.rearm.boot, ev.Boot), ep.n)})
}

func (m *Model) migrationError(q *qp, ev *event.Event) {
	if q.flags&fMigErrDone != 0 {
		return
	}
	q.flags |= fMigErrDone
	f := Finding{Kind: MigrationError, Severity: SevCritical, Remediation: remedyMigErr,
		Evidence:    []Evidence{evd(refOf(ev), "PATH_MIG_ERR")},
		Explanation: fmt.Sprintf("PATH_MIG_ERR: migration to the alternate path (%s) failed, the QP is unprotected", q.alt)}
	if q.rearm.ok() {
		f.Evidence = append([]Evidence{evd(q.rearm, "last rearm")}, f.Evidence...)
		f.First = ev.Boot
	}
	m.emit(q, f)
}

// flap counts migrations in the sliding window; one finding per burst.
func (m *Model) flap(q *qp, ev *event.Event) {
	x := q.x
	n, win := m.cfg.FlapCount, uint64(m.cfg.FlapWindow)
	if len(x.migs) > 0 && ev.Boot-x.migs[len(x.migs)-1].boot > win {
		x.flapping = false // quiet for a whole window: a new burst may start
	}
	if len(x.migs) == n {
		copy(x.migs, x.migs[1:])
		x.migs = x.migs[:n-1]
	}
	x.migs = append(x.migs, refOf(ev))
	if x.flapping || len(x.migs) < n || ev.Boot-x.migs[0].boot > win {
		return
	}
	x.flapping = true
	f := Finding{Kind: Flapping, Severity: SevWarning, Remediation: remedyFlap, Last: ev.Boot,
		Explanation: fmt.Sprintf("%d migrations within %v (limit %d in %v): the QP keeps failing over", n, since(x.migs[0].boot, ev.Boot), n, m.cfg.FlapWindow)}
	for _, r := range x.migs {
		f.Evidence = append(f.Evidence, evd(r, "migration"))
	}
	m.emit(q, f)
}

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
	if alt && x.ep != nil && !x.ep.rearm.ok() && x.ep.altFailed == 0 {
		x.ep.altFailed = md.Ret
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
	m.emit(q, Finding{Kind: APMModifyFailed, Severity: SevWarning, Errno: errno,
		Evidence:    []Evidence{evd(refOf(ev), what+" refused by "+md.Hook)},
		Explanation: fmt.Sprintf("the kernel refused the %s with errno %d (%s)", what, errno, errnoName(errno)),
		Remediation: failHint(cls, errno)})
}

func errnoName(e int32) string {
	switch e {
	case 1:
		return "EPERM"
	case 12:
		return "ENOMEM"
	case 13:
		return "EACCES"
	case 14:
		return "EFAULT"
	case 19:
		return "ENODEV"
	case 22:
		return "EINVAL"
	case 95:
		return "EOPNOTSUPP"
	case 110:
		return "ETIMEDOUT"
	}
	return "errno " + itoa(uint64(uint32(e)))
}

func failHint(cls uint64, errno int32) string {
	switch {
	case errno == 22 && (cls == clsAlt || cls == clsAltRearm):
		return "EINVAL on an alternate path: on a RoCE (Ethernet) port the core refuses IB_QP_ALT_PATH, APM is InfiniBand-only; on InfiniBand check alt_port_num, alt_pkey_index, alt_timeout and alt_ah_attr (and that the transition is RTR->RTS, RTS->RTS or earlier), then load the new alternate and rearm"
	case errno == 22:
		return "EINVAL on PATH_MIG_STATE: it is accepted only on RTR->RTS, RTS->RTS and SQD->RTS, and only REARM or MIGRATED may be written; rearm from RTS after loading a new alternate"
	case errno == 95:
		return "EOPNOTSUPP: the device does not support APM (ibv_devinfo -v shows AUTO_PATH_MIG when it does)"
	}
	return "retry the step in the seed's order: send the LAP, load the new alternate, rearm"
}

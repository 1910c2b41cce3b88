package apm

import (
	"time"
)

// evd names an evidence item.
func evd(r ref, what string) Evidence { return Evidence{Seq: r.seq, Boot: r.boot, What: what} }

// emit fills the common fields of f and hands it to the sink. Last defaults
// to the time being judged (the input's own stamp, or the deadline's), and
// is never before First; JudgedAt is the model time, never before Last.
func (m *Model) emit(q *qp, f Finding) uint64 { return m.emitSev(q, f, false) }

// emitInfo emits f at info severity, below its kind's.
func (m *Model) emitInfo(q *qp, f Finding) uint64 {
	f.Severity = SevInfo
	return m.emitSev(q, f, true)
}

func (m *Model) emitSev(q *qp, f Finding, keep bool) uint64 {
	f.ID = m.ids.Next()
	f.QP = m.keyView(q)
	f.PID = q.pid
	f.Comm = m.comms.name(q.comm)
	if f.Severity == 0 && !f.Resolved && !keep {
		if e, ok := Info(f.Kind); ok {
			f.Severity = e.Severity
		}
	}
	if f.First == 0 && len(f.Evidence) > 0 {
		f.First = f.Evidence[0].Boot
	}
	if f.Last == 0 {
		f.Last = m.at
	}
	f.Last = max(f.Last, f.First)
	f.JudgedAt = max(m.now, f.Last)
	m.uncertain(q, &f)
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

// The three steps after each migration, on each side (IBTA APM; the order
// a correct application follows).
const stepsRemedy = "after each migration, on each side: (1) send a LAP with the new alternate path, " +
	"(2) load it with ib_modify_qp RTS->RTS IB_QP_ALT_PATH (remote LID from the LAP), " +
	"(3) rearm with RTS->RTS IB_QP_PATH_MIG_STATE=REARM"

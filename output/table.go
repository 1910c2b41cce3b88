package output

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// Writer renders a stream of events and the findings judged on them.
type Writer interface {
	Write(e *event.Event) error
	WriteFinding(f *apm.Finding) error
	Close() error
}

// TableWriter streams events as table rows in plain aligned columns (-o
// wide): no borders, each cell whole; a cell wider than its column pushes
// the rest of its row right, the last column is never cut or wrapped.
type TableWriter struct {
	w       io.Writer
	started bool
}

var tableHeader = []string{"TIME", "KIND", "COMM:PID", "DEVICE", "QPN", "WHAT"}

// tableWidths are the columns' widths but the last's: what most cells
// take.
var tableWidths = []int{15, 12, 20, 8, 7}

// NewTableWriter writes a streaming table to w.
func NewTableWriter(w io.Writer) *TableWriter { return &TableWriter{w: w} }

func (tw *TableWriter) Write(e *event.Event) error {
	if err := tw.start(); err != nil {
		return err
	}
	return tw.row(Row(e))
}

func (tw *TableWriter) start() error {
	if tw.started {
		return nil
	}
	tw.started = true
	return tw.row(tableHeader)
}

// row writes one row: each cell but the last padded to its column's
// width, two spaces between columns.
func (tw *TableWriter) row(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		b.WriteString(c)
		if pad := tableWidths[i] - utf8.RuneCountInString(c); pad > 0 {
			b.WriteString(strings.Repeat(" ", pad))
		}
		b.WriteString("  ")
	}
	b.WriteByte('\n')
	_, err := io.WriteString(tw.w, b.String())
	return err
}

// Close ends the table.
func (tw *TableWriter) Close() error { return nil }

// Row is the table row of an event. Host strings (comm, device, hook
// names) are escaped: they are data, never terminal control.
func Row(e *event.Event) []string {
	qpn := ""
	if e.QPN != 0 {
		qpn = fmt.Sprint(e.QPN)
	}
	return []string{
		e.Time.Format("15:04:05.000000"), e.Kind.String(), fmt.Sprintf("%s:%d", escape.Text(e.Comm), e.PID),
		escape.Text(e.Device), qpn, escape.Text(Detail(e)),
	}
}

func pathText(name string, p *event.Path, alt bool) string {
	if p == nil {
		return ""
	}
	s := fmt.Sprintf("%s{port=%d dlid=0x%x sgid=%d", name, p.Port, p.DLID, p.SGIDIndex)
	if p.SrcPathBits != 0 {
		s += fmt.Sprintf(" bits=%d", p.SrcPathBits)
	}
	if p.IsGlobal {
		s += " dgid=" + GID(p.DGID)
	}
	if alt {
		s += fmt.Sprintf(" pkey=%d timeout=%d", p.PKeyIndex, p.Timeout)
	}
	return s + "}"
}

// Detail is the human summary of an event's payload.
func Detail(e *event.Event) string {
	switch {
	case e.Modify != nil:
		m := e.Modify
		var state, mig string
		if m.Has(event.AttrState) {
			state = "->" + m.State.String()
		}
		if m.Has(event.AttrPathMigState) {
			mig = "mig=" + m.MigState.String()
		}
		owner := m.Origin.String()
		if m.Origin == event.OriginUser {
			owner = fmt.Sprintf("user h=%d", m.UHandle)
		}
		ret := retText(m.Ret)
		if e.Kind == event.KindModifyEntry {
			ret = "entered (the modify record follows at its return)"
		}
		if m.RefusedByUverbs() {
			ret += " by ib_uverbs"
			if m.Alt != nil {
				ret += fmt.Sprintf(" (alt av port %d)", m.AltAHPort)
			}
		}
		return join(state, mig, pathText("av", m.Primary, false), pathText("alt", m.Alt, true),
			"["+strings.Join(AttrNames(m.AttrMask), ",")+"]", ret,
			fmt.Sprintf("(%s %s)", m.QPType, owner))
	case e.QP != nil:
		return join(e.QP.Type.String(), "via "+e.QP.Hook, "("+e.QP.Origin.String()+")")
	case e.Port != nil:
		return fmt.Sprintf("%s port %d", e.Port.Type, e.Port.Port)
	case e.Notify != nil:
		n := e.Notify
		return join(n.Type.String(), retText(n.Ret), fmt.Sprintf("cm_id=%s local=0x%x remote=0x%x",
			hex64(n.CMID), n.LocalID, n.RemoteID), "state="+CMState(n.CMState), "lap="+LapState(n.LapState))
	case e.Handler != nil:
		h := e.Handler
		s := join(event.CMAttrName(h.AttrID)+" handler", retText(h.Ret),
			fmt.Sprintf("local=0x%x remote=0x%x", h.LocalID, h.RemoteID))
		if h.AttrID == event.CMAttrLAP {
			s += fmt.Sprintf(" alt_dlid=0x%x", h.AltDLID)
		}
		return s
	case e.MAD != nil:
		m := e.MAD
		src := ""
		if m.FromUser {
			src = "(umad)"
		}
		return join(m.Dir.String(), madAttr(m), fmt.Sprintf("class=0x%02x method=0x%02x tid=%s port=%d qp%d",
			m.MgmtClass, m.Method, hex64(m.TID), m.Port, m.MADQPN),
			fmt.Sprintf("local=0x%x remote=0x%x slid=0x%x", m.LocalID, m.RemoteID, m.SLID), src)
	case e.Life != nil:
		return join(e.Life.QPType.String(), e.Life.Origin.String(), retText(e.Life.Ret))
	case e.Truth != nil:
		t := e.Truth
		if t.Op != event.TruthRead {
			return join(t.Source, "says", t.Op.String())
		}
		state, cm, rqpn := "", "", ""
		if t.HasState {
			state = t.State.String()
		}
		if t.CM {
			cm = "cm_id bound"
		}
		if t.RQPN != 0 {
			rqpn = fmt.Sprintf("rqpn=%d", t.RQPN)
		}
		return join(t.Source+":", state, "mig="+t.Mig.String(), rqpn, cm, fmt.Sprintf("(%s %s)", t.QPType, t.Origin))
	}
	return ""
}

package output

import (
	"fmt"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// traceFinding is a finding or a resolution as one line of trace's
// --output json, beside the events: the finding line every output writes
// (findingline.Line, docs/events.md), with the fields trace's stream had
// before it, kept for one release: "kind" names the line's kind among the
// events ("finding" or "resolution", like "type"), and the QP and times
// are also where events keep them.
type traceFinding struct {
	Kind string `json:"kind"` // deprecated: equal to type
	findingline.Line
	Time   string `json:"time,omitempty"` // deprecated: last_time
	BootNS uint64 `json:"boot_ns"`        // deprecated: last_boot_ns
	Device string `json:"device"`         // deprecated: qp.device
	QPN    uint32 `json:"qpn"`            // deprecated: qp.qpn
	Gen    uint32 `json:"gen"`            // deprecated: qp.gen
}

func wallText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// FindingJSON is the JSON form of a finding or resolution in trace's
// stream, host the host it runs on. Its strings are escaped
// (internal/escape): valid UTF-8, the original bytes recoverable.
func FindingJSON(f *apm.Finding, host string) any {
	l := findingline.New(*f, host)
	j := traceFinding{Kind: l.Type, Line: l, Time: wallText(f.LastTime), BootNS: f.Last,
		Device: f.QP.Device, QPN: f.QP.QPN, Gen: f.QP.Gen}
	return escape.Value(j)
}

// WriteFinding writes f as one line.
func (j *JSONWriter) WriteFinding(f *apm.Finding) error { return j.enc.Encode(FindingJSON(f, j.host)) }

// SetHost names the host the findings are from (the source's).
func (j *JSONWriter) SetHost(host string) { j.host = host }

// FindingRow is the table row of a finding: KIND is FINDING or RESOLVED in
// capitals so it stands out among the events.
func FindingRow(f *apm.Finding) []string {
	kind := "FINDING"
	if f.Resolved {
		kind = "RESOLVED"
	}
	ts := ""
	if !f.LastTime.IsZero() {
		ts = f.LastTime.Format("15:04:05.000000")
	}
	return []string{ts, kind, fmt.Sprintf("%s:%d", escape.Text(f.Comm), f.PID), escape.Text(f.QP.Device),
		fmt.Sprint(f.QP.QPN), escape.Text(FindingDetail(f))}
}

// FindingDetail is the human summary of a finding: severity, kind,
// explanation and the events that prove it.
func FindingDetail(f *apm.Finding) string {
	var seqs []string
	for _, e := range f.Evidence {
		if e.Seq != 0 {
			seqs = append(seqs, fmt.Sprint(e.Seq))
		}
	}
	proof := ""
	if len(seqs) > 0 {
		proof = "[events " + strings.Join(seqs, ",") + "]"
	}
	return join(f.Severity.String(), string(f.Kind)+":", f.Explanation, proof)
}

// WriteFinding appends the finding's row.
func (tw *TableWriter) WriteFinding(f *apm.Finding) error {
	if err := tw.start(); err != nil {
		return err
	}
	return tw.row(FindingRow(f))
}

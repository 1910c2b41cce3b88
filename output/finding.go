package output

import (
	"fmt"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// jsonFinding is a finding or a resolution as one line of --output json,
// beside the events (docs/events.md): "kind" says which, "finding" names
// the finding kind, and the QP and owner are where events keep them.
type jsonFinding struct {
	Kind          string         `json:"kind"` // "finding" or "resolution"
	Time          string         `json:"time,omitempty"`
	BootNS        uint64         `json:"boot_ns"`
	Finding       apm.Kind       `json:"finding"`
	ID            uint64         `json:"id"`
	Severity      apm.Severity   `json:"severity"`
	PID           uint32         `json:"pid"`
	Comm          string         `json:"comm"`
	Device        string         `json:"device"`
	QPN           uint32         `json:"qpn"`
	Gen           uint32         `json:"gen"`
	FirstTime     string         `json:"first_time,omitempty"`
	FirstBootNS   uint64         `json:"first_boot_ns"`
	Evidence      []apm.Evidence `json:"evidence"`
	Explanation   string         `json:"explanation"`
	Remediation   string         `json:"remediation"`
	Errno         int32          `json:"errno,omitempty"`
	ErrnoName     string         `json:"errno_name,omitempty"`
	Resolved      bool           `json:"resolved"`
	Resolves      uint64         `json:"resolves,omitempty"`
	UnprotectedNS int64          `json:"unprotected_ns,omitempty"`
	Cause         uint64         `json:"cause,omitempty"` // unprotected-failure: the finding that left the QP unprotected
	Uncertain     string         `json:"uncertain,omitempty"`
}

func wallText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// FindingJSON is the JSON form of a finding or resolution. Its strings are
// escaped (internal/escape): valid UTF-8, the original bytes recoverable.
func FindingJSON(f *apm.Finding) any {
	j := jsonFinding{Kind: "finding", Time: wallText(f.LastTime), BootNS: f.Last, Finding: f.Kind, ID: f.ID,
		Severity: f.Severity, PID: f.PID, Comm: f.Comm, Device: f.QP.Device, QPN: f.QP.QPN, Gen: f.QP.Gen,
		FirstTime: wallText(f.FirstTime), FirstBootNS: f.First, Evidence: f.Evidence,
		Explanation: f.Explanation, Remediation: f.Remediation, Errno: f.Errno, Resolved: f.Resolved,
		Resolves: f.Resolves, UnprotectedNS: int64(f.Unprotected), Cause: f.Cause,
		Uncertain: f.Uncertain}
	if f.Resolved {
		j.Kind = "resolution"
	}
	if f.Errno > 0 {
		j.ErrnoName = Errno(-f.Errno)
	}
	if j.Evidence == nil {
		j.Evidence = []apm.Evidence{}
	}
	return escape.Value(j)
}

// WriteFinding writes f as one line.
func (j *JSONWriter) WriteFinding(f *apm.Finding) error { return j.enc.Encode(FindingJSON(f)) }

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
	return tw.t.Append(FindingRow(f))
}

package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

func sampleFinding() *apm.Finding {
	return &apm.Finding{ID: 3, Kind: apm.APMModifyFailed, Severity: apm.SevWarning,
		QP: apm.Key{Device: "rxe0", QPN: 17, Gen: 2}, PID: 200, Comm: "lab-pair", First: 1000, Last: 1005,
		FirstTime: t0, LastTime: t0.Add(5 * time.Millisecond),
		Evidence:    []apm.Evidence{{Seq: 12, Boot: 1000, What: "alt load"}, {Boot: 1005, What: "netlink reads MIGRATED"}},
		Explanation: "the alternate load was refused", Remediation: "APM is InfiniBand-only", Errno: 22, JudgedAt: 1007}
}

// A finding line sits beside the events: kind "finding", the finding kind
// in "finding", the QP and owner where events keep them.
func TestFindingJSON(t *testing.T) {
	var b bytes.Buffer
	w := NewJSONWriter(&b)
	w.SetHost("hostA")
	f := sampleFinding()
	r := &apm.Finding{ID: 4, Kind: apm.MissedRearm, Resolved: true, Resolves: 1, QP: f.QP, Unprotected: time.Second}
	if err := w.WriteFinding(f); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFinding(r); err != nil {
		t.Fatal(err)
	}
	ls := strings.Split(strings.TrimSpace(b.String()), "\n")
	var m, res map[string]any
	if len(ls) != 2 || json.Unmarshal([]byte(ls[0]), &m) != nil || json.Unmarshal([]byte(ls[1]), &res) != nil {
		t.Fatalf("want two JSON lines:\n%s", b.String())
	}
	for k, v := range map[string]any{"kind": "finding", "finding": "apm-modify-failed", "severity": "warning",
		"device": "rxe0", "qpn": 17.0, "gen": 2.0, "pid": 200.0, "comm": "lab-pair", "errno": 22.0,
		"errno_name": "EINVAL", "resolved": false, "time": "2026-01-02T03:04:05.005006Z", "boot_ns": 1005.0,
		"schema": 1.0, "type": "finding", "host": "hostA", "last_boot_ns": 1005.0, "first_boot_ns": 1000.0, "judged_at": 1007.0} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if qp, _ := m["qp"].(map[string]any); qp["device"] != "rxe0" || qp["qpn"] != 17.0 || qp["gen"] != 2.0 {
		t.Errorf("qp %v: want the key nested as in every output", m["qp"])
	}
	if ev := m["evidence"].([]any); len(ev) != 2 {
		t.Errorf("evidence %v", ev)
	}
	if res["kind"] != "resolution" || res["type"] != "resolution" || res["finding"] != "missed-rearm" || res["resolves"] != 1.0 || res["unprotected_ns"] != 1e9 || res["time"] != nil {
		t.Errorf("resolution line %v", res)
	}
	if _, ok := m["cause"]; ok {
		t.Errorf("a finding without a cause has a cause field: %v", m)
	}
	b.Reset()
	u := &apm.Finding{ID: 5, Kind: apm.UnprotectedFailure, QP: f.QP, Cause: 4, Unprotected: 3 * time.Second}
	if err := w.WriteFinding(u); err != nil {
		t.Fatal(err)
	}
	var uf map[string]any
	if err := json.Unmarshal(b.Bytes(), &uf); err != nil || uf["cause"] != 4.0 || uf["unprotected_ns"] != 3e9 {
		t.Errorf("unprotected-failure line %v (%v): want cause 4, unprotected_ns 3e9", uf, err)
	}
}

func TestFindingRow(t *testing.T) {
	row := FindingRow(sampleFinding())
	if row[1] != "FINDING" || row[2] != "lab-pair:200" || row[4] != "17" ||
		row[5] != "warning apm-modify-failed: the alternate load was refused [events 12]" {
		t.Errorf("row %q", row)
	}
	var b bytes.Buffer
	w := NewTableWriter(&b)
	if err := w.WriteFinding(sampleFinding()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !strings.Contains(b.String(), "FINDING") || !strings.Contains(b.String(), "TIME") {
		t.Errorf("a finding first must start the table:\n%s", b.String())
	}
}

// Filters pick findings by their QP, the QP's owner and their kind.
func TestFilterFindings(t *testing.T) {
	f := sampleFinding()
	for _, c := range []struct {
		devices, qpns, pids, comms, kinds []string
		want                              bool
	}{
		{want: true},
		{devices: []string{"rxe1"}},
		{qpns: []string{"17"}, want: true},
		{pids: []string{"201"}},
		{comms: []string{"lab-pair"}, want: true},
		{kinds: []string{"modify"}},
		{kinds: []string{"finding"}, want: true},
		{kinds: []string{"missed-rearm"}},
		{kinds: []string{"apm-modify-failed"}, want: true},
	} {
		flt, err := ParseFilter(c.devices, c.qpns, c.pids, c.comms, c.kinds)
		if err != nil {
			t.Fatal(err)
		}
		if got := flt.MatchFinding(f); got != c.want {
			t.Errorf("%+v: MatchFinding %v, want %v", c, got, c.want)
		}
	}
	flt, _ := ParseFilter(nil, nil, nil, nil, []string{"missed-rearm"})
	if flt.Match(sample()[1]) {
		t.Error("--kind with only a finding kind must hide events")
	}
}

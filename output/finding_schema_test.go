package output

import (
	"bytes"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
)

// Every finding trace writes, of every kind, as a finding and as a
// resolution, with and without the optional fields, is a line of the one
// finding schema.
func TestTraceFindingsMatchSchema(t *testing.T) {
	var b bytes.Buffer
	w := NewJSONWriter(&b)
	w.SetHost("host\x1b[31m")
	n := 0
	for i, k := range apm.Kinds() {
		info, _ := apm.Info(k)
		f := apm.Finding{ID: uint64(2*i + 1), Kind: k, Severity: info.Severity, QP: apm.Key{Device: "ibsim\xff0", QPN: 1 << 23, Gen: 7},
			PID: 4242, Comm: "a\tb", First: 10, Last: 20, LastTime: t0, Explanation: "e", Remediation: "r"}
		if i%2 == 0 {
			f.Errno, f.Uncertain, f.Cause, f.FirstTime = 22, "lost events overlap", 9, t0
			f.Evidence = []apm.Evidence{{Seq: 3, Boot: 10, What: "PATH_MIG"}}
		}
		r := f
		r.ID, r.Resolved, r.Resolves, r.Unprotected = f.ID+1, true, f.ID, time.Second
		for _, x := range []*apm.Finding{&f, &r} {
			if err := w.WriteFinding(x); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if got := findinglinetest.Lines(t, b.Bytes()); got != n {
		t.Errorf("checked %d lines, wrote %d", got, n)
	}
}

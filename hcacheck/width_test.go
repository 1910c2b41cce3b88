package hcacheck

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/columns"
)

// The report fits 80 columns: a line a point, its detail wrapped under it,
// long event lists cut with an ellipsis; -o wide is the table in full.
func TestReportWidth(t *testing.T) {
	r := &Report{Device: "mlx5_bond_0", Driver: "mlx5_core", Port: 1, AltPort: 2, QPN: map[string]uint32{"A": 16777214, "B": 16777215},
		Points: []Point{
			{Point: PtArmedModify, Answer: "refuse", Errno: "EINVAL", Detail: "A was MIGRATED with its alternate loaded; reads MIGRATED after the refused modify"},
			{Point: PtForcedEvent, Answer: "after", Errno: "0", Event: "A:PATH_MIG", Detail: "PATH_MIG on A 10.2 ms after the modify returned (not readable at once)"},
			{Point: PtCommEstAfter, Answer: "raised", Event: "A:COMM_EST B:COMM_EST A:COMM_EST B:COMM_EST A:PATH_MIG B:PATH_MIG",
				Detail: "COMM_EST on both QPs after the forced migration, " + strings.Repeat("again and again, ", 8)},
			{Point: PtDeadAlt, Answer: "died-unmigrated", Errno: "0", Event: "A:QP_FATAL", Detail: "RETRY_EXC_ERR on A without a PATH_MIG: A moved to ERR on its primary"},
		},
		Knobs: map[string]string{PtArmedModify: "refuse", PtForcedEvent: "after"}}
	var b bytes.Buffer
	if err := r.Write(&b, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n")[1:] { // the first line is a sentence
		if w := columns.Width(l); w > columns.Terminal {
			t.Errorf("%d columns: %q", w, l)
		}
	}
	for _, want := range []string{"comm-est-after-migration  raised", "died-unmigrated", "EINVAL", columns.Ellipsis,
		"    RETRY_EXC_ERR on A without a PATH_MIG", "lab knobs: armed-modify=refuse forced-event=after"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	b.Reset()
	if err := r.WriteWide(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "A:COMM_EST B:COMM_EST A:COMM_EST B:COMM_EST A:PATH_MIG B:PATH_MIG") || !strings.Contains(b.String(), "lab knobs:") ||
		!strings.Contains(b.String(), strings.Repeat("again and again, ", 8)) {
		t.Errorf("wide:\n%s", b.String())
	}
	// plain aligned columns, no boxes: the header's columns start where
	// the rows' do
	if strings.ContainsAny(b.String(), "│┌─┼|+") {
		t.Errorf("wide draws a box:\n%s", b.String())
	}
	lines := strings.Split(b.String(), "\n")
	if h, r := lines[1], lines[2]; strings.Index(h, "ANSWER") != strings.Index(r, "refuse") {
		t.Errorf("wide columns not aligned:\n%s\n%s", h, r)
	}
}

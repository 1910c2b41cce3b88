package fleet

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/internal/columns"
)

// fleet status fits 80 columns on realistic rows: fully qualified host
// names, bonded devices, the largest QPNs; the host and device names are
// cut with an ellipsis, never the state, the time, a QPN or armed. -o wide
// (WriteStatusTable) has a connection a row, every cell whole.
func TestStatusTableWidth(t *testing.T) {
	since := time.Date(2026, 11, 29, 14, 42, 35, 0, time.UTC)
	s := &Status{ByState: map[string]int{"one-sided": 1, "unprotected": 1, "armed": 40}, Rows: []StatusRow{
		{State: "one-sided", A: PeerEnd{Host: "compute-node-0417.rack12.cluster.example.com", Device: "mlx5_bond_0", QPN: 16777215},
			B: PeerEnd{Host: "compute-node-0418.rack12.cluster.example.com", Device: "mlx5_bond_1", QPN: 1234567}, ArmedA: true, Since: since},
		{State: "unprotected", A: PeerEnd{Host: "n1", Device: "ibsim0", QPN: 17}, B: PeerEnd{Host: "n2\x1b[2J", Device: "ibsim1", QPN: 18}, Since: since},
	}}
	var b bytes.Buffer
	if err := WriteStatusFit(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1+2*len(s.Rows)+1 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for _, l := range lines[:len(lines)-1] { // the summary line is a sentence
		if w := columns.Width(l); w > columns.Terminal {
			t.Errorf("%d columns: %q", w, l)
		}
	}
	for _, want := range []string{"one-sided", "2026-11-29T14:42:35Z", "16777215", "1234567", "compute-node-0417.", "compute-node-0418.", columns.Ellipsis, `n2\x1b[2J`,
		"2 connections cannot fail over"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("raw escape:\n%q", out)
	}
	if !strings.HasPrefix(lines[1], "one-sided ") || !strings.Contains(lines[1], " a ") || !strings.HasSuffix(lines[1], " yes") ||
		!strings.HasPrefix(lines[2], "2026-11-29T14:42:35Z ") || !strings.Contains(lines[2], " b ") || !strings.HasSuffix(lines[2], " no") {
		t.Errorf("ends:\n%s", out)
	}
	b.Reset()
	if err := WriteStatusTable(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compute-node-0417.rack12.cluster.example.com", "mlx5_bond_1", "2 connections cannot fail over"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("wide: no %q in\n%s", want, b.String())
		}
	}
}

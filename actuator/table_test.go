package actuator

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/columns"
)

// `qp list` fits 80 columns on realistic rows (the largest QPNs and pids,
// a full 15-byte comm, an escaped one, a long device name): the comm, the
// handle and the device are cut with an ellipsis, never a number; -o wide
// keeps every cell whole.
func TestQPListWidth(t *testing.T) {
	h := func(n int64) *int64 { return &n }
	rows := []Row{
		{Device: "mlx5_0", QPN: 16777215, RQPN: 16777214, Type: "RC", State: "RTS", Mig: "MIGRATED", PID: 4194304, Comm: "ompi-worker-001", Handle: h(123456), Uverbs: "uverbs10"},
		{Device: "mlx5_bond_0", QPN: 1234567, RQPN: 7654321, Type: "UC", State: "RTR", Mig: "ARMED", PID: 31337, Comm: "\x1b[2J\nforged", Handle: h(2), Uverbs: "uverbs0"},
		{Device: "vendor_rdma_device_with_a_long_name0", QPN: 17, RQPN: 18, Type: "RC", State: "RTS", Mig: "REARM", Kernel: true, Comm: "ib_srp"},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rows, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(rows)+1 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if w := columns.Width(l); w > columns.Terminal {
			t.Errorf("%d columns: %q", w, l)
		}
	}
	for _, want := range []string{"16777215", "16777214", "4194304", "MIGRATED", "kernel", columns.Ellipsis, `\x1b`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("raw escape:\n%q", out)
	}
	b.Reset()
	if err := WriteTable(&b, rows, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ompi-worker-001", `\x1b[2J\x0aforged`, "uverbs10/123456", "vendor_rdma_device_with_a_long_name0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("wide: no %q in\n%s", want, b.String())
		}
	}
}

package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// A process name is set by any local user (prctl PR_SET_NAME); a device
// name or hook name may come from a file handed over.
const hostile = "\x1b[2J\r\ncritical missed-rearm rxe0/17 forged\x07"

// checkTerminalSafe fails when out holds a control character other than
// newline, or when the hostile string started a line of its own.
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) {
			t.Fatalf("%s: control %U reaches the terminal:\n%q", what, r, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " |│"), "critical missed-rearm") {
			t.Fatalf("%s: a host string forged a line:\n%s", what, out)
		}
	}
	if !strings.Contains(out, `\x1b[2J\x0d\x0acritical`) {
		t.Fatalf("%s: the hostile string is not shown escaped:\n%s", what, out)
	}
}

func hostileEvents() []*event.Event {
	es := sample()
	for _, e := range es {
		e.Comm = hostile
		if e.Modify != nil {
			e.Modify.Hook = hostile
		}
		if e.QP != nil {
			e.QP.Hook = hostile
		}
		if e.Truth != nil {
			e.Truth.Source = hostile
		}
	}
	return es
}

func hostileFinding() *apm.Finding {
	f := sampleFinding()
	f.Comm = hostile
	f.QP.Device = hostile
	f.Evidence[0].What = hostile
	f.Explanation = "owned by " + hostile
	return f
}

func TestTableEscapesHostStrings(t *testing.T) {
	var b bytes.Buffer
	w := NewTableWriter(&b)
	for _, e := range hostileEvents() {
		e.Device = hostile
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFinding(hostileFinding()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	checkTerminalSafe(t, "trace table", b.String())
}

func TestLineTableEscapesHostStrings(t *testing.T) {
	var b bytes.Buffer
	w := NewLineWriter(&b)
	for _, e := range hostileEvents() {
		e.Device = hostile
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFinding(hostileFinding()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	checkTerminalSafe(t, "trace table, 80 columns", b.String())
}

func TestHooksAndSummaryEscapeHostStrings(t *testing.T) {
	var b bytes.Buffer
	hooks := []event.Hook{{Name: hostile, Module: hostile, Signal: hostile, Method: event.HookMissing, Reason: hostile}}
	c := Counts{}
	f := hostileFinding()
	f.Remediation = hostile
	c.AddFinding(f, true)
	if err := PrintSummary(&b, c, event.Stats{}, hooks); err != nil {
		t.Fatal(err)
	}
	checkTerminalSafe(t, "summary", b.String())
	b.Reset()
	if err := PrintHooksWide(&b, hooks); err != nil {
		t.Fatal(err)
	}
	checkTerminalSafe(t, "hook table, wide", b.String())
	// The default table cuts the escaped strings to fit: still no control,
	// no forged line, and the escape shows where the cut leaves it.
	b.Reset()
	if err := PrintHooks(&b, hooks); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) {
			t.Fatalf("hook table: control %U reaches the terminal:\n%q", r, out)
		}
	}
	if !strings.Contains(out, `\x1b[2J`) || strings.Contains(out, "\ncritical") {
		t.Fatalf("hook table: %q", out)
	}
}

// JSON lines stay valid UTF-8 and give back the original bytes through
// escape.Unescape, invalid UTF-8 included.
func TestJSONKeepsHostBytesRecoverable(t *testing.T) {
	bad := "mlx\xff\xfe" + hostile
	var b bytes.Buffer
	w := NewJSONWriter(&b)
	for _, e := range hostileEvents() {
		e.Device = bad
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	f := hostileFinding()
	f.QP.Device = bad
	if err := w.WriteFinding(f); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %v: %q", err, l)
		}
		for field, want := range map[string]string{"comm": hostile, "device": bad} {
			got, err := escape.Unescape(m[field].(string))
			if err != nil || got != want {
				t.Fatalf("%s %q does not give back %q: %v", field, m[field], want, err)
			}
		}
		if h, ok := m["hook"].(string); ok {
			if got, _ := escape.Unescape(h); got != hostile {
				t.Fatalf("hook %q not recoverable", h)
			}
		}
		if strings.ContainsAny(l, "\x1b\r\x07") {
			t.Fatalf("raw control in a JSON line: %q", l)
		}
	}
}

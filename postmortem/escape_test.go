package postmortem

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// A process name any local user sets (prctl PR_SET_NAME), trying to forge
// a finding line and clear the screen.
const hostile = "\x1b[2J\r\ncritical missed-rearm mlx5_0/7#1 forged\x9b"

// A recording whose comm, device and host name are hostile: the text
// report shows them escaped, no line starts with the forged text, and the
// JSON keeps the bytes recoverable.
func TestReportEscapesHostStrings(t *testing.T) {
	b := newHost(0)
	b.Comm = hostile
	b.Device = "mlx\xff" + hostile
	connect(b, 7, 8, 3)
	b.After(time.Second)
	b.PathMig(7)
	path := write(t, t.TempDir(), "a.rec", "host\r\n"+hostile, b, uint64(10*time.Second))
	var warns []string
	rep, err := Run(context.Background(), []string{path}, Options{All: true, Warn: func(s string) { warns = append(warns, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) == 0 {
		t.Fatal("no finding: the test does not reach the finding lines")
	}
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			t.Fatalf("control %U reaches the terminal:\n%q", r, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "critical missed-rearm") {
			t.Fatalf("a host string forged a line:\n%s", out)
		}
	}
	if !strings.Contains(out, `\x1b[2J\x0d\x0acritical`) || !strings.Contains(out, `mlx\xff`) {
		t.Fatalf("host strings not shown escaped:\n%s", out)
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(html.String(), "\x1b\r") || !strings.Contains(html.String(), `\x1b[2J`) {
		t.Fatal("the HTML holds raw control characters or does not show them escaped")
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back struct{ QPs []QP }
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, q := range back.QPs {
		comm, err1 := escape.Unescape(q.Comm)
		dev, err2 := escape.Unescape(q.Device)
		if err1 != nil || err2 != nil || comm != hostile || dev != "mlx\xff"+hostile {
			t.Fatalf("JSON does not give back the bytes: %q %q", q.Comm, q.Device)
		}
	}
	// The report itself keeps the raw bytes (filters match them).
	if rep.QPs[0].Comm != hostile {
		t.Fatalf("writing escaped the report in place: %q", rep.QPs[0].Comm)
	}
}

// WriteJSON, which writes the lists an element at a time, writes what one
// json.MarshalIndent of the escaped report would.
func TestWriteJSONAsOneDocument(t *testing.T) {
	b := newHost(0)
	b.Comm = hostile
	connect(b, 7, 8, 3)
	b.After(time.Second)
	b.PathMig(7)
	path := write(t, t.TempDir(), "a.rec", "h\x00st", b, uint64(10*time.Second))
	for _, o := range []Options{{All: true}, {QPNs: []uint32{999}}} {
		rep, err := Run(context.Background(), []string{path}, o)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteJSON(&got, rep); err != nil {
			t.Fatal(err)
		}
		want, err := json.MarshalIndent(escape.Value(*rep), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want)+"\n" {
			t.Fatalf("streamed JSON differs:\n%s\nwant\n%s", got.String(), want)
		}
	}
}

package actuator

import (
	"bytes"
	"strings"
	"testing"
)

// A process name any local user sets: `qp list`, `actuate` and the action
// log print it escaped, so it cannot forge a line or drive the terminal.
func TestTextOutputEscapesHostStrings(t *testing.T) {
	const hostile = "\x1b[2J\r\nactuator: forged"
	var b bytes.Buffer
	if err := WriteTable(&b, []Row{{Device: "rxe\xff", QPN: 17, Comm: hostile, PID: 7}}, true); err != nil {
		t.Fatal(err)
	}
	WriteLog(&b, LogEntry{Op: OpRearm, Device: hostile, Step: "resolve", Detail: "owner " + hostile}, false)
	if err := WriteResult(&b, &Result{Op: OpQuery, Target: Target{Comm: hostile, Device: hostile}}, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\r\xff") {
		t.Fatalf("raw control bytes in the output:\n%q", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "actuator: forged") {
			t.Fatalf("a host string forged a line:\n%s", out)
		}
	}
	if !strings.Contains(out, `\x1b[2J\x0d\x0aactuator: forged`) || !strings.Contains(out, `rxe\xff`) {
		t.Fatalf("not shown escaped:\n%s", out)
	}
}

// The JSON forms keep a name that is not UTF-8 recoverable instead of
// replacing its bytes by U+FFFD.
func TestJSONOutputEscapesHostStrings(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDoc(&b, ListDoc{Schema: DocSchema, QPs: []Row{{Device: "rxe\xff", QPN: 17, Comm: "a\x1b"}}}); err != nil {
		t.Fatal(err)
	}
	WriteLog(&b, LogEntry{Op: OpRearm, Device: "rxe\xff", Detail: "x"}, true)
	if err := WriteResult(&b, &Result{Op: OpQuery, Target: Target{Comm: "a\x1b", Device: "rxe\xff"}}, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "\ufffd") || strings.Count(out, `rxe\\xff`) != 3 || strings.Count(out, `a\\x1b`) != 2 {
		t.Fatalf("JSON does not carry the escaped names:\n%s", out)
	}
}

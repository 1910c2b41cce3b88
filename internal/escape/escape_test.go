package escape

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ib_write_bw", "ib_write_bw"},
		{"mlx5_0", "mlx5_0"},
		{"", ""},
		{"naïve ☃", "naïve ☃"},
		{"\x1b[2J\r\ncritical missed-rearm", `\x1b[2J\x0d\x0acritical missed-rearm`},
		{"a\tb\x7f", `a\x09b\x7f`},
		{"back\\slash", `back\\slash`},
		{"bad\xff\xc3", `bad\xff\xc3`},
		{"c1\u009b31m", `c1\u009b31m`},
		{"rtl\u202eevil", `rtl\u202eevil`},
		{"line\u2028sep", `line\u2028sep`},
		{"lab\u200bpair", `lab\u200bpair`},
		{"zw\u200c\u200dj", `zw\u200c\u200dj`},
		{"word\u2060joiner", `word\u2060joiner`},
		{"\ufeffbom", `\ufeffbom`},
		{"\u200a hair space stays", "\u200a hair space stays"},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A clean string is returned without a copy.
func TestTextCleanNoAlloc(t *testing.T) {
	s := "rxe0 ib_write_bw 17"
	if n := testing.AllocsPerRun(100, func() { _ = Text(s) }); n != 0 {
		t.Fatalf("Text of a clean string allocates %v times", n)
	}
}

func TestUnescapeRejects(t *testing.T) {
	for _, s := range []string{`\`, `\q`, `\x1`, `\xzz`, `\u12`, `\u12zz`} {
		if _, err := Unescape(s); err == nil {
			t.Errorf("Unescape(%q) accepted", s)
		}
	}
}

// Text's output is printable, valid UTF-8, and Unescape gives back the
// input exactly.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "mlx5_0", "\x1b[2J\r\n", "\xff\\x41", "\u009b\u202e", "\\u0041"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Text(s)
		checkSafe(t, e)
		back, err := Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Text(%q)) = %q, %v", s, back, err)
		}
	})
}

func checkSafe(t *testing.T, e string) {
	t.Helper()
	if !utf8.ValidString(e) {
		t.Fatalf("%q is not valid UTF-8", e)
	}
	for _, r := range e {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || special(r) {
			t.Fatalf("%q holds control %U", e, r)
		}
	}
}

type inner struct {
	Name  string
	Tags  []string
	Count []uint64
	any   string
}

type doc struct {
	Comm    string
	Kind    kind
	P       *inner
	List    []inner
	ByName  map[string]int
	Any     any
	private string
}

type kind string

func TestValue(t *testing.T) {
	orig := doc{
		Comm:    "\x1b[2J",
		Kind:    "ok\n",
		P:       &inner{Name: "\xff", Tags: []string{"a\rb"}, Count: []uint64{1}, any: "\x00"},
		List:    []inner{{Name: "x\x07"}},
		ByName:  map[string]int{"k\x1b": 1},
		Any:     "\x9b",
		private: "\x1b",
	}
	got := Value(orig)
	if got.Comm != `\x1b[2J` || got.Kind != `ok\x0a` || got.P.Name != `\xff` || got.P.Tags[0] != `a\x0db` ||
		got.List[0].Name != `x\x07` || got.ByName[`k\x1b`] != 1 || got.Any != `\x9b` {
		t.Fatalf("not escaped: %+v %+v", got, *got.P)
	}
	if got.P.Count[0] != 1 || got.private != "\x1b" || got.P.any != "\x00" {
		t.Fatalf("non-string or unexported fields changed: %+v", got)
	}
	// The original is untouched.
	if orig.Comm != "\x1b[2J" || orig.P.Name != "\xff" || orig.P.Tags[0] != "a\rb" || orig.List[0].Name != "x\x07" {
		t.Fatalf("original changed: %+v", orig)
	}
	// JSON of the copy is valid and decodes back to the original bytes.
	b, err := json.Marshal(got)
	if err != nil || !utf8.Valid(b) || strings.ContainsAny(string(b), "\x1b\x9b") {
		t.Fatalf("json: %v %q", err, b)
	}
	var back doc
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if s, err := Unescape(back.P.Name); err != nil || s != "\xff" {
		t.Fatalf("invalid UTF-8 not recoverable from JSON: %q %v", s, err)
	}
}

// A document with nothing to escape is returned without a copy.
func TestValueCleanShares(t *testing.T) {
	d := doc{Comm: "ok", P: &inner{Name: "n", Tags: []string{"a"}}, List: []inner{{Name: "x"}}}
	got := Value(d)
	if got.P != d.P || &got.List[0] != &d.List[0] {
		t.Fatal("a clean document was copied")
	}
	if n := testing.AllocsPerRun(10, func() { _ = Value(d) }); n > 2 {
		t.Fatalf("a clean document costs %v allocations", n)
	}
}

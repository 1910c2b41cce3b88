package columns

import (
	"bytes"
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"mlx5_0", 6, "mlx5_0"},
		{"mlx5_0", 5, "mlx5…"},
		{`\x1b[2J\x0aforged`, 8, `\x1b[2J…`},
		{"节点一号", 5, "节点…"}, // two columns a character
		{"abc", 0, ""},
	} {
		if got := Clip(c.in, c.n); got != c.want || Width(got) > max(c.n, 0) {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// Fit cuts the columns in the order given, each down to its floor before
// the next, never one it may not cut, and the rows it writes fit the limit.
func TestFitAndWrite(t *testing.T) {
	tb := Table{Rows: [][]string{
		{"STATE", "HOST", "QPN", "WHY"},
		{"one-sided", strings.Repeat("h", 60), "16777215", "a reason"},
		{"armed", "n1", "17", strings.Repeat("r", 40)},
	}, Cut: []Cut{{3, 20}, {1, 10}}}
	if !tb.Fit(Terminal, 2) {
		t.Fatal("does not fit")
	}
	if tb.Rows[1][0] != "one-sided" || tb.Rows[1][2] != "16777215" {
		t.Errorf("cut a column it may not: %q", tb.Rows[1])
	}
	if !strings.HasSuffix(tb.Rows[1][1], Ellipsis) || tb.Rows[2][3] != strings.Repeat("r", 19)+Ellipsis {
		t.Errorf("not cut as asked: %q", tb.Rows)
	}
	// the host, cut second, got what the reason left: every column but it
	// whole or at its floor, and the row exactly at the limit
	if w := tb.Widths(); w[1] != Terminal-2-9-8-20-3*2 {
		t.Errorf("widths %v", w)
	}
	var b bytes.Buffer
	if err := tb.Write(&b, "  "); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "  STATE      HOST") {
		t.Fatalf("%q", b.String())
	}
	for _, l := range lines {
		if Width(l) > Terminal || strings.HasSuffix(l, " ") {
			t.Errorf("%d columns or trailing space: %q", Width(l), l)
		}
	}
	// Nothing to cut: reported, cells left whole.
	small := Table{Rows: [][]string{{"A", strings.Repeat("x", 100)}}}
	if small.Fit(Terminal, 0) || Width(small.Rows[0][1]) != 100 {
		t.Errorf("fit without cuttable columns: %q", small.Rows)
	}
}

func TestWrap(t *testing.T) {
	got := Wrap("->RTR av{port=1 dlid=0x3 sgid=1} [STATE,AV,DEST_QPN] ret=0 (RC user h=2)", 24)
	want := []string{"->RTR av{port=1 dlid=0x3", "sgid=1}", "[STATE,AV,DEST_QPN]", "ret=0 (RC user h=2)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%q", got)
	}
	got = Wrap("a "+strings.Repeat("x", 25)+" b", 10)
	if strings.Join(got, "|") != "a|xxxxxxxxxx|xxxxxxxxxx|xxxxx b" {
		t.Errorf("%q", got)
	}
	for _, l := range Wrap(strings.Repeat("节", 30), 7) {
		if Width(l) > 7 {
			t.Errorf("%q is %d wide", l, Width(l))
		}
	}
	if Wrap("", 10) != nil {
		t.Error("lines for nothing")
	}
}

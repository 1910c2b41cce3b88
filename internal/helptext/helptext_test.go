package helptext

import (
	"strings"
	"testing"
)

func TestReflow(t *testing.T) {
	in := "one two three four five six seven\neight nine\n\n  kept   as written, however long it is\nten"
	got := Reflow(in, 12)
	want := "one two\nthree four\nfive six\nseven eight\nnine\n\n  kept   as written, however long it is\nten"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	long := strings.Repeat("x", 20)
	if got := Reflow("a "+long+" b", 10); got != "a\n"+long+"\nb" {
		t.Errorf("a long word: %q", got)
	}
}

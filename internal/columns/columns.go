// Package columns lays out tables for a terminal: a table fits a width (80
// columns by default) by cutting the cells of the columns that may be cut,
// widest first, each cut cell ending in an ellipsis. Cells are the caller's
// text, already escaped (internal/escape): this package measures and cuts
// them, it never escapes.
package columns

import (
	"io"
	"strings"

	"github.com/clipperhouse/displaywidth"
)

// Terminal is the width a default table fits.
const Terminal = 80

// Ellipsis ends a cut cell.
const Ellipsis = "…"

// Width is how many terminal columns s takes.
func Width(s string) int { return displaywidth.String(s) }

// Clip cuts s to at most n columns, ending it with an ellipsis when it cuts.
func Clip(s string, n int) string {
	if Width(s) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	return displaywidth.TruncateString(s, n, Ellipsis)
}

// Table is a table of text cells.
type Table struct {
	Rows [][]string // the first row is the header
	Gap  int        // columns between two cells (0: 2)
	// Cut says which columns may be cut to fit, in the order they are cut:
	// each down to its Min, as far as needed, before the next is cut. A
	// column may come twice, the second time with a lower Min.
	Cut []Cut
}

// Cut is a column that may be cut, and the narrowest it is cut to.
type Cut struct{ Col, Min int }

func (t *Table) gap() int {
	if t.Gap == 0 {
		return 2
	}
	return t.Gap
}

// Widths is the width of each column.
func (t *Table) Widths() []int {
	var w []int
	for _, r := range t.Rows {
		for i, c := range r {
			if i >= len(w) {
				w = append(w, 0)
			}
			w[i] = max(w[i], Width(c))
		}
	}
	return w
}

// Fit cuts the columns Cut names, in its order, until a row laid out with
// the gaps and extra columns of its own (borders, an indent) fits limit.
// The cut cells end in an ellipsis. It reports whether the table fits.
func (t *Table) Fit(limit, extra int) bool {
	w := t.Widths()
	if len(w) == 0 {
		return true
	}
	total := extra + t.gap()*(len(w)-1)
	for _, n := range w {
		total += n
	}
	for _, c := range t.Cut {
		if total <= limit {
			break
		}
		if c.Col >= len(w) || w[c.Col] <= c.Min {
			continue
		}
		by := min(total-limit, w[c.Col]-max(c.Min, 1))
		w[c.Col] -= by
		total -= by
	}
	for _, c := range t.Cut {
		if c.Col >= len(w) {
			continue
		}
		for _, r := range t.Rows {
			if c.Col < len(r) {
				r[c.Col] = Clip(r[c.Col], w[c.Col])
			}
		}
	}
	return total <= limit
}

// Write lays the rows out left-aligned, the gap between columns, each line
// after indent, no trailing spaces.
func (t *Table) Write(w io.Writer, indent string) error {
	var b strings.Builder
	for _, l := range t.Lines() {
		b.WriteString(indent + l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Lines are the rows laid out as Write lays them, without indent and
// newline: for a caller that writes other lines between them.
func (t *Table) Lines() []string {
	widths := t.Widths()
	var out []string
	for _, r := range t.Rows {
		var line strings.Builder
		for i, c := range r {
			if i > 0 {
				line.WriteString(strings.Repeat(" ", t.gap()))
			}
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-Width(c)))
			}
		}
		out = append(out, strings.TrimRight(line.String(), " "))
	}
	return out
}

// Wrap breaks s into lines of at most width columns at spaces; a word
// longer than a line is cut across lines.
func Wrap(s string, width int) []string {
	width = max(width, 1)
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		for Width(word) > width { // a word longer than a line
			if line != "" {
				lines, line = append(lines, line), ""
			}
			head := displaywidth.TruncateString(word, width, "")
			if head == "" { // one grapheme wider than the line
				head = string([]rune(word)[:1])
			}
			lines, word = append(lines, head), word[len(head):]
		}
		switch {
		case word == "":
		case line == "":
			line = word
		case Width(line)+1+Width(word) <= width:
			line += " " + word
		default:
			lines, line = append(lines, line), word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

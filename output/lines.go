package output

import (
	"io"
	"strings"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/columns"
)

// LineWriter streams events and findings for an 80-column terminal (trace
// -o table): a line of the fixed columns (time, kind, comm:pid, device,
// QPN; a long comm or device cut with an ellipsis), then what the event
// says, wrapped under it. -o wide is TableWriter: one row each, in full.
type LineWriter struct {
	w       io.Writer
	started bool
}

// NewLineWriter writes events to w as LineWriter does.
func NewLineWriter(w io.Writer) *LineWriter { return &LineWriter{w: w} }

// The fixed columns' widths, and the indent of the text under them.
var lineWidths = [...]int{15, 12, 24, 12, 8}

const lineIndent = "    "

func (l *LineWriter) Write(e *event.Event) error { return l.record(Row(e)) }

// WriteFinding writes the finding's record: KIND is FINDING or RESOLVED.
func (l *LineWriter) WriteFinding(f *apm.Finding) error { return l.record(FindingRow(f)) }

// Close ends the output (nothing to close: every record is whole).
func (l *LineWriter) Close() error { return nil }

// record writes one record in one Write (Buffered keeps it whole).
func (l *LineWriter) record(row []string) error {
	var b strings.Builder
	if !l.started {
		b.WriteString(lineOf(tableHeader[:5]))
		b.WriteString(lineIndent + tableHeader[5] + "\n")
		l.started = true
	}
	b.WriteString(lineOf(row[:5]))
	for _, s := range columns.Wrap(row[5], columns.Terminal-len(lineIndent)) {
		b.WriteString(lineIndent + s + "\n")
	}
	_, err := io.WriteString(l.w, b.String())
	return err
}

// lineOf lays the fixed cells out, each cut to its column.
func lineOf(cells []string) string {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i == 2 { // comm:pid: the comm is cut, never the pid
			if j := strings.LastIndexByte(c, ':'); j >= 0 {
				c = columns.Clip(c[:j], lineWidths[i]-columns.Width(c[j:])) + c[j:]
			}
		}
		c = columns.Clip(c, lineWidths[i])
		b.WriteString(c)
		b.WriteString(strings.Repeat(" ", lineWidths[i]-columns.Width(c)))
	}
	return strings.TrimRight(b.String(), " ") + "\n"
}

package fleet

import (
	"fmt"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// stateUnknown is the state fleet status gives a connection one of whose
// hosts is silent: what its last record said is not known to hold.
const stateUnknown = "unknown"

// maxHostLines bounds the hosts the text of a status names one a line
// (-o json lists them all).
const maxHostLines = 20

// silentEnd reports whether an end's host is silent.
func (g *Engine) silentEnd(e *end) bool {
	h := g.hosts[e.owner]
	return h != nil && h.silent
}

// armedCell is an end's ARMED cell: unknown when its host is silent,
// never armed.
func armedCell(armed, silent bool) string {
	switch {
	case silent:
		return stateUnknown
	case armed:
		return "yes"
	}
	return "no"
}

// writeHosts says which hosts are silent and whose clock is a second or
// more from the stream's, and counts the hosts heard.
func writeHosts(w io.Writer, s *Status) error {
	if len(s.Hosts) == 0 {
		return nil
	}
	silent, lines := 0, 0
	for _, h := range s.Hosts {
		if h.Silent {
			silent++
		}
	}
	if _, err := fmt.Fprintf(w, "%d hosts heard, %d silent: %d connections unknown\n", len(s.Hosts), silent, s.ByState[stateUnknown]); err != nil {
		return err
	}
	for _, h := range s.Hosts {
		off := h.Offset.Round(time.Millisecond)
		if !h.Silent && off < time.Second && off > -time.Second {
			continue
		}
		if lines++; lines > maxHostLines {
			_, err := fmt.Fprintf(w, "(more hosts: -o json lists them all)\n")
			return err
		}
		what := fmt.Sprintf("clock %+.3fs from the stream's", off.Seconds())
		if h.Silent {
			what = fmt.Sprintf("silent since %s, %d ends; %s", h.LastHeard.Format(time.RFC3339), h.Ends, what)
		}
		if _, err := fmt.Fprintf(w, "host %s: %s\n", escape.Text(h.Host), what); err != nil {
			return err
		}
	}
	return nil
}

// badRows counts the rows known not to fail over (not unknown).
func badRows(s *Status) int {
	n := 0
	for _, r := range s.Rows {
		if r.State != stateUnknown {
			n++
		}
	}
	return n
}

package fleet

import (
	"fmt"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/internal/columns"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// WriteStatusFit writes the status as a table that fits 80 columns (fleet
// status -o table) and the summary line: a connection on two lines, one an
// end (its host, device, QPN and whether it is armed), beside its state and
// since when; long host and device names cut with an ellipsis.
// WriteStatusTable (-o wide) has a connection a row, every cell whole.
func WriteStatusFit(w io.Writer, s *Status) error {
	t := columns.Table{Rows: [][]string{{"STATE / SINCE", "END", "HOST", "DEVICE", "QPN", "ARMED"}},
		Cut: []columns.Cut{{Col: 2, Min: 18}, {Col: 3, Min: 10}, {Col: 2, Min: 8}, {Col: 3, Min: 6}}}
	for _, r := range s.Rows {
		t.Rows = append(t.Rows,
			[]string{r.State, "a", escape.Text(r.A.Host), escape.Text(r.A.Device), fmt.Sprint(r.A.QPN), armedCell(r.ArmedA, r.SilentA)},
			[]string{r.Since.Format(time.RFC3339), "b", escape.Text(r.B.Host), escape.Text(r.B.Device), fmt.Sprint(r.B.QPN), armedCell(r.ArmedB, r.SilentB)})
	}
	t.Fit(columns.Terminal, 0)
	if err := t.Write(w, ""); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d connections cannot fail over; %d paired (%d armed, %d one-sided, %d unprotected, %d half-armed, %d without APM), %d ends unpaired\n",
		badRows(s), paired(s), s.ByState["armed"], s.ByState["one-sided"], s.ByState["unprotected"], s.ByState["half-armed"], s.ByState["no-apm"], s.Unpaired)
	if err == nil && s.UnconfirmedEnds > 0 {
		_, err = fmt.Fprintf(w, "%d unpaired ends point at an end that does not point back (not judged as pairs; -o json says why)\n", s.UnconfirmedEnds)
	}
	if err == nil {
		err = writeRefused(w, s)
	}
	if err == nil {
		err = writeHosts(w, s)
	}
	return err
}

package actuator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/columns"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// Row is one line of `apmwatch qp list`.
type Row struct {
	Device  string `json:"device"`
	Port    uint32 `json:"port,omitempty"`
	QPN     uint32 `json:"qpn"`
	RQPN    uint32 `json:"rqpn"`
	Type    string `json:"type"`
	State   string `json:"state"`
	Mig     string `json:"path_mig_state"`
	PID     uint32 `json:"pid,omitempty"`
	Comm    string `json:"comm,omitempty"`
	Kernel  bool   `json:"kernel"`
	Handle  *int64 `json:"handle,omitempty"` // the owner's uverbs handle, when resolved
	Uverbs  string `json:"uverbs,omitempty"`
	Problem string `json:"handle_problem,omitempty"` // why the handle is unknown
}

// ListOptions filter `qp list`.
type ListOptions struct {
	PID     int
	Device  string
	Handles bool // resolve each user QP's handle (borrows the owners' files; queries only)
}

// List returns every RC/UC QP from rdma netlink, with handles when asked.
func (a *Actuator) List(o ListOptions) ([]Row, error) {
	qps, err := a.Rows()
	if err != nil {
		return nil, fmt.Errorf("reading rdma netlink: %w", err)
	}
	var out []Row
	for _, q := range qps {
		if q.Type != event.QPTypeRC && q.Type != event.QPTypeUC {
			continue
		}
		if (o.PID != 0 && int(q.PID) != o.PID) || (o.Device != "" && q.Device != o.Device) {
			continue
		}
		r := Row{Device: q.Device, Port: q.Port, QPN: q.LQPN, RQPN: q.RQPN, Type: q.Type.String(), State: q.State.String(),
			PID: q.PID, Comm: q.Comm, Kernel: q.Kernel, Mig: "-"}
		if q.HasPathMig {
			r.Mig = q.PathMig.String()
		}
		if o.Handles && !q.Kernel && q.PID != 0 {
			b, t, err := a.roots.resolve(int(q.PID), q, 0, false, 0)
			if err != nil {
				r.Problem = err.Error()
			} else {
				h := int64(t.Handle)
				r.Handle, r.Uverbs = &h, t.File.Uverbs
				b.Close()
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Device != out[j].Device {
			return out[i].Device < out[j].Device
		}
		return out[i].QPN < out[j].QPN
	})
	return out, nil
}

// WriteTable prints `qp list` as a table: fit to 80 columns, the owner's
// name, the handle and the device cut with an ellipsis where the row would
// be wider; wide, every cell whole.
func WriteTable(w io.Writer, rows []Row, wide bool) error {
	t := columns.Table{Rows: [][]string{{"DEVICE", "QPN", "RQPN", "TYPE", "STATE", "MIG", "PID", "COMM", "HANDLE"}},
		Cut: []columns.Cut{{Col: 7, Min: 8}, {Col: 8, Min: 10}, {Col: 0, Min: 8}, {Col: 7, Min: 4}, {Col: 8, Min: 6}}}
	for _, r := range rows {
		h := "-"
		switch {
		case r.Kernel:
			h = "kernel"
		case r.Handle != nil:
			h = fmt.Sprintf("%s/%d", r.Uverbs, *r.Handle)
		}
		pid := "-"
		if r.PID != 0 {
			pid = fmt.Sprint(r.PID)
		}
		t.Rows = append(t.Rows, []string{escape.Text(r.Device), fmt.Sprint(r.QPN), fmt.Sprint(r.RQPN), r.Type, r.State, r.Mig,
			pid, escape.Text(r.Comm), h})
	}
	if !wide {
		t.Fit(columns.Terminal, 0)
	}
	return t.Write(w, "")
}

// Show runs `qp show`: the netlink row and, for a user QP, the owner's view
// through QUERY_QP.
func (a *Actuator) Show(ctx context.Context, device string, qpn uint32) (Row, *Result, error) {
	rows, err := a.List(ListOptions{Device: device})
	if err != nil {
		return Row{}, nil, err
	}
	var hits []Row
	for _, r := range rows {
		if r.QPN == qpn {
			hits = append(hits, r)
		}
	}
	switch {
	case len(hits) == 0:
		return Row{}, nil, fmt.Errorf("%w: no rc/uc qp %d in rdma netlink", ErrNotFound, qpn)
	case len(hits) > 1:
		return Row{}, nil, fmt.Errorf("%w: qp %d exists on several devices: name one with --device", ErrAmbiguous, qpn)
	}
	r := hits[0]
	if r.Kernel {
		return r, nil, nil
	}
	res, err := a.Do(ctx, Request{Op: OpQuery, PID: int(r.PID), QPN: qpn, Device: r.Device})
	if err == nil {
		h := int64(res.Target.Handle)
		r.Handle, r.Uverbs = &h, res.Target.File.Uverbs
	}
	return r, res, err
}

// WriteResult prints an operation's result as text or one JSON object.
func WriteResult(w io.Writer, res *Result, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(escape.Value(res))
	}
	t := res.Target
	fmt.Fprintf(w, "%s qp %d on %s: pid %d (%s), %s fd %d, handle %d (%s)\n", res.Op, t.QPN, escape.Text(t.Device), t.PID, escape.Text(t.Comm), t.File.Uverbs, t.File.FD, t.Handle, t.How)
	if res.Before != nil {
		writeAttr(w, "before", res.Before)
	}
	for _, c := range res.Commands {
		state := "sent"
		if !c.Sent {
			state = "would send (dry run)"
		}
		if c.Errno != "" {
			state += ", refused " + c.Errno
		}
		fmt.Fprintf(w, "  %s MODIFY_QP %s: attr_mask %#x, driver id %d\n", state, c.What, c.AttrMask, c.DriverID)
		fmt.Fprintf(w, "    ib_uverbs_modify_qp  %s\n", c.Body)
		fmt.Fprintf(w, "    ioctl hdr+attrs      %s (pointers shown as 0)\n", c.Ioctl)
	}
	if res.After != nil {
		writeAttr(w, "after", res.After)
		if len(res.Changes) == 0 {
			fmt.Fprintln(w, "  changed: nothing")
		}
		for _, c := range res.Changes {
			fmt.Fprintf(w, "  changed: %s\n", c)
		}
	}
	if res.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", res.Note)
	}
	if res.DryRun {
		fmt.Fprintln(w, "  dry run: nothing sent, nothing changed")
	}
	return nil
}

func writeAttr(w io.Writer, what string, a *Attr) {
	fmt.Fprintf(w, "  %s: state %s, mig %s, remote qpn %d, sq_psn %d, rq_psn %d\n", what,
		event.QPState(a.State), event.MigState(a.PathMigState), a.DestQPN, a.SQPSN, a.RQPSN)
	fmt.Fprintf(w, "    primary:   %s, timeout %d\n", FormatDest(a.Dest), a.Timeout)
	fmt.Fprintf(w, "    alternate: %s, alt_port %d, timeout %d, pkey_index %d\n", FormatDest(a.AltDest), a.AltPortNum, a.AltTimeout, a.AltPKeyIndex)
}

// WriteLog prints one log entry as a line of text (for stderr) or JSON.
func WriteLog(w io.Writer, e LogEntry, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(escape.Value(e))
		return
	}
	fmt.Fprintf(w, "actuator: %s %s pid %d %s/%d handle %d: %s: %s\n", e.Time.Format("15:04:05.000000"), e.Op, e.PID, escape.Text(e.Device), e.QPN, e.Handle, e.Step, escape.Text(strings.TrimSpace(e.Detail)))
}

// DevRows is a convenience for tests: netlink rows from a fixed slice.
func DevRows(qps []rdmanl.QP) func() ([]rdmanl.QP, error) {
	return func() ([]rdmanl.QP, error) { return qps, nil }
}

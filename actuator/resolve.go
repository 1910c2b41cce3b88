package actuator

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
	"golang.org/x/sys/unix"
)

// Handles remembers, from the probes' modify events, which uverbs object id
// (handle) a user QP has: QUERY_QP does not return the local QPN, so this
// is the only exact map. It is fed from the event stream (Observe) and
// holds (device, qpn) -> handle; a destroy forgets it. The handle is the
// object's id in its owner's file whoever issued the modify (the owner, or
// a borrower such as the actuator); resolve checks it against netlink.
type Handles struct {
	m map[event.QPKey]uint32
}

// NewHandles returns an empty map.
func NewHandles() *Handles { return &Handles{m: map[event.QPKey]uint32{}} }

// Observe records the handle of user QP modify events.
func (h *Handles) Observe(ev *event.Event) {
	switch {
	case ev.Kind == event.KindModify && ev.Modify != nil && ev.Modify.Origin == event.OriginUser && ev.QPN != 0:
		h.m[ev.Key()] = ev.Modify.UHandle
	case ev.Kind == event.KindQPDestroy:
		delete(h.m, ev.Key())
	}
}

// Lookup returns the handle seen for a QP.
func (h *Handles) Lookup(device string, qpn uint32) (uint32, bool) {
	if h == nil {
		return 0, false
	}
	v, ok := h.m[event.QPKey{Device: device, QPN: qpn}]
	return v, ok
}

// Target is a resolved QP: the netlink row, the owner's file and handle.
type Target struct {
	PID    int          `json:"pid"`
	Comm   string       `json:"comm,omitempty"`
	Device string       `json:"device"`
	QPN    uint32       `json:"qpn"`
	Handle uint32       `json:"handle"`
	File   OwnerFile    `json:"owner_file"`
	How    string       `json:"resolved_by"` // "probes" or "netlink-match"
	Row    rdmanl.QP    `json:"-"`
	Type   event.QPType `json:"-"`
}

// findRow picks the netlink row of QPN (on device, if given) and checks it
// belongs to pid and is a user RC/UC QP.
func findRow(rows []rdmanl.QP, pid int, device string, qpn uint32) (rdmanl.QP, error) {
	var hits []rdmanl.QP
	for _, r := range rows {
		if r.LQPN == qpn && (device == "" || r.Device == device) {
			hits = append(hits, r)
		}
	}
	switch {
	case len(hits) == 0 && device != "":
		return rdmanl.QP{}, fmt.Errorf("%w: no qp %d on %s in rdma netlink", ErrNotFound, qpn, device)
	case len(hits) == 0:
		return rdmanl.QP{}, fmt.Errorf("%w: no qp %d in rdma netlink", ErrNotFound, qpn)
	case len(hits) > 1:
		var ds []string
		for _, h := range hits {
			ds = append(ds, h.Device)
		}
		return rdmanl.QP{}, fmt.Errorf("%w: qp %d exists on %s: name one with --device", ErrAmbiguous, qpn, strings.Join(ds, ", "))
	}
	r := hits[0]
	if r.Kernel {
		return r, fmt.Errorf("%w: qp %d on %s belongs to the kernel (%s): kernel ulp qps cannot be changed from userspace, not trying", ErrKernelQP, qpn, r.Device, r.Comm)
	}
	if pid != 0 && int(r.PID) != pid {
		return r, fmt.Errorf("%w: qp %d on %s belongs to pid %d (%s), not %d", ErrNotFound, qpn, r.Device, r.PID, r.Comm, pid)
	}
	if r.Type != event.QPTypeRC && r.Type != event.QPTypeUC {
		return r, fmt.Errorf("%w: qp %d on %s is %s: apm needs rc or uc", ErrWrongState, qpn, r.Device, r.Type)
	}
	return r, nil
}

// candidate is one handle of the owner and what QUERY_QP said about it.
type candidate struct {
	handle uint32
	attr   Attr
}

// matchRow keeps the candidates whose query agrees with the netlink row:
// remote QPN and state must agree; the port (samePort), then the PSNs
// (the same reading when no traffic flows between the two queries) break
// ties.
func matchRow(cs []candidate, r rdmanl.QP) []candidate {
	var strict, port []candidate
	for _, c := range cs {
		a := c.attr
		if a.DestQPN != r.RQPN || event.QPState(a.State) != r.State {
			continue
		}
		strict = append(strict, c)
		if samePort(a, r.Port) {
			port = append(port, c)
		}
	}
	if len(strict) <= 1 {
		return strict
	}
	if len(port) >= 1 {
		strict = port
	}
	if len(strict) <= 1 {
		return strict
	}
	var psn []candidate
	for _, c := range strict {
		if c.attr.SQPSN == r.SQPSN && c.attr.RQPSN == r.RQPSN {
			psn = append(psn, c)
		}
	}
	if len(psn) >= 1 {
		return psn
	}
	return strict
}

// scanLimit bounds the fallback scan of handles when INFO_HANDLES is not
// available: handles are small integers from the file's xarray.
const scanLimit = 256

// candidates queries every QP handle of a borrowed file.
func candidates(b *Borrowed) ([]candidate, error) {
	hs, err := b.Handles()
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) {
		hs = nil
		for h := uint32(0); h < scanLimit; h++ {
			hs = append(hs, h)
		}
	} else if err != nil {
		return nil, fmt.Errorf("listing the qp handles of %s: %w", b.File.Uverbs, err)
	}
	var cs []candidate
	for _, h := range hs {
		a, err := b.Query(h)
		if err != nil {
			continue // not a QP, or gone meanwhile
		}
		cs = append(cs, candidate{h, a})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].handle < cs[j].handle })
	return cs, nil
}

// resolve finds the owner's file and handle of a QP and returns the file
// borrowed. known is a handle from the probes (ok false: none); start, when
// not 0, the owner's start time as judged. The pidfd is opened first and
// the process checked again after the borrow (pid reuse).
func (r roots) resolve(pid int, row rdmanl.QP, known uint32, haveKnown bool, start uint64) (*Borrowed, Target, error) {
	t := Target{PID: pid, Comm: row.Comm, Device: row.Device, QPN: row.LQPN, Row: row, Type: row.Type}
	proc, err := r.pin(pid, start)
	if err != nil {
		return nil, t, err
	}
	defer proc.close()
	files, err := r.ownerFiles(pid, row.Device)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, t, fmt.Errorf("%w: process %d", ErrNoProcess, pid)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, t, permissionError(pid, "reading /proc/"+fmt.Sprint(pid)+"/fd", err)
		}
		return nil, t, err
	}
	if len(files) == 0 {
		return nil, t, fmt.Errorf("%w: process %d has no /dev/infiniband/uverbs file for %s open", ErrNoFile, pid, row.Device)
	}
	type hit struct {
		b *Borrowed
		c candidate
	}
	var hits []hit
	for _, f := range files {
		b, err := r.borrow(proc, f)
		if err != nil {
			for _, h := range hits {
				h.b.Close()
			}
			return nil, t, err
		}
		var cs []candidate
		if haveKnown {
			if a, err := b.Query(known); err == nil {
				cs = []candidate{{known, a}}
			}
		} else if cs, err = candidates(b); err != nil {
			b.Close()
			for _, h := range hits {
				h.b.Close()
			}
			return nil, t, err
		}
		m := matchRow(cs, row)
		for _, c := range m {
			hits = append(hits, hit{b, c})
		}
		if len(m) == 0 {
			b.Close()
		}
	}
	switch len(hits) {
	case 0:
		if haveKnown {
			return nil, t, fmt.Errorf("%w: handle %d seen by the probes for qp %d does not answer or no longer matches rdma netlink", ErrGone, known, row.LQPN)
		}
		return nil, t, fmt.Errorf("%w: no qp handle of process %d on %s matches qp %d (remote qpn %d, %s)", ErrNotFound, pid, row.Device, row.LQPN, row.RQPN, row.State)
	case 1:
		if err := r.same(proc); err != nil {
			hits[0].b.Close()
			return nil, t, err
		}
		t.Handle, t.File = hits[0].c.handle, hits[0].b.File
		t.How = "netlink-match"
		if haveKnown {
			t.How = "probes"
		}
		return hits[0].b, t, nil
	}
	var hs []string
	seen := map[*Borrowed]bool{}
	for _, h := range hits {
		hs = append(hs, fmt.Sprintf("%s handle %d", h.b.File.Uverbs, h.c.handle))
		if !seen[h.b] {
			seen[h.b] = true
			h.b.Close()
		}
	}
	return nil, t, fmt.Errorf("%w: qp %d of process %d matches %s (same remote qpn, state, port and psns): run with the collector so the probes see its handle", ErrAmbiguous, row.LQPN, pid, strings.Join(hs, ", "))
}

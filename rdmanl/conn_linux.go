package rdmanl

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/boottime"
	"golang.org/x/sys/unix"
)

// Conn is an rdma netlink socket. It is not safe for concurrent use.
type Conn struct {
	fd  int
	seq uint32
	buf []byte
}

// ErrNoNetlink is rdma netlink missing: the kernel knows no NETLINK_RDMA
// until ib_core is loaded.
var ErrNoNetlink = errors.New("this host has no rdma netlink: ib_core is not loaded (modprobe ib_core)")

// socketError says why the socket could not be opened, in the tool's words
// where the cause is known.
func socketError(err error) error {
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		return ErrNoNetlink
	}
	return fmt.Errorf("opening rdma netlink socket: %w", err)
}

// Dial opens an rdma netlink socket. Reading the QP table needs no
// privilege; a process sees the QPs of its own pid namespace (kernel QPs
// only from the initial one).
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return nil, socketError(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding rdma netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(int64(recvTimeout))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("setting rdma netlink timeout: %w", err)
	}
	return &Conn{fd: fd, buf: make([]byte, 64<<10)}, nil
}

// recvTimeout bounds the wait for each answer datagram.
const recvTimeout = 5 * time.Second

// Close closes the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }

// dump sends a dump request and returns the payloads of its answers.
func (c *Conn) dump(op uint16, attrs []byte) ([][]byte, error) {
	return c.ask(op, flagRequest|flagDump, attrs)
}

// ask sends a request with the given flags and returns the payloads of
// its answers: the messages of a dump up to its end, or the one message
// of a get.
func (c *Conn) ask(op, flags uint16, attrs []byte) ([][]byte, error) {
	c.seq++
	seq := c.seq
	if err := unix.Sendto(c.fd, requestFlags(op, flags, seq, attrs), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sending rdma netlink request %d: %w", op, err)
	}
	var out [][]byte
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if errors.Is(err, unix.EAGAIN) {
			// SO_RCVTIMEO ran out: not the kernel's EAGAIN answer
			// (a QP on another port), which QP tells apart.
			return nil, fmt.Errorf("receiving rdma netlink answer %d: no answer in %v: %w", op, recvTimeout, os.ErrDeadlineExceeded)
		}
		if err != nil {
			return nil, fmt.Errorf("receiving rdma netlink answer %d: %w", op, err)
		}
		msgs, err := splitMessages(c.buf[:n])
		if err != nil {
			return nil, fmt.Errorf("rdma netlink answer %d: %w", op, err)
		}
		done, err := collect(msgs, seq, &out)
		if err != nil {
			return nil, fmt.Errorf("rdma netlink answer %d: %w", op, err)
		}
		if done {
			return out, nil
		}
	}
}

// collect appends copies of the payloads of msgs answering seq, and reports
// the end of the dump.
func collect(msgs []message, seq uint32, out *[][]byte) (bool, error) {
	for _, m := range msgs {
		if m.seq != seq {
			continue // a late answer to an earlier request
		}
		switch m.typ {
		case nlmsgNoop:
		case nlmsgDone:
			return true, errnoOf(m.data)
		case nlmsgError:
			if err := errnoOf(m.data); err != nil {
				return true, err
			}
			return true, nil
		default:
			*out = append(*out, append([]byte(nil), m.data...))
			if m.flags&flagMulti == 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// Devices lists the RDMA devices.
func (c *Conn) Devices() ([]Device, error) {
	msgs, err := c.dump(cmdGet, nil)
	if err != nil {
		return nil, fmt.Errorf("listing rdma devices: %w", err)
	}
	out := make([]Device, 0, len(msgs))
	for _, m := range msgs {
		d, err := parseDevice(m)
		if err != nil {
			return nil, fmt.Errorf("listing rdma devices: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// QPs lists the QPs of one device.
func (c *Conn) QPs(dev Device) ([]QP, error) {
	msgs, err := c.dump(cmdResQPGet, attrU32(attrDevIndex, dev.Index))
	if err != nil {
		return nil, fmt.Errorf("listing qps of %s: %w", dev.Name, err)
	}
	var out []QP
	for _, m := range msgs {
		qs, err := parseQPs(m)
		if err != nil {
			return nil, fmt.Errorf("listing qps of %s: %w", dev.Name, err)
		}
		out = append(out, qs...)
	}
	return out, nil
}

// QP reads one QP of a device by its number: a get, not a dump (the
// kernel looks the QP up by number and answers with that one entry, however
// many QPs the device holds). nldev keeps QPs per port: the get must name
// the port ib_core last set for the QP (qp->port; APM does not change it),
// and answers EAGAIN for another port, so each port is asked in turn. ok
// false: the device has no such QP visible to this process. A QP without a
// port yet (RESET) is found by a dump of the device's table.
func (c *Conn) QP(dev Device, lqpn uint32) (q QP, ok bool, err error) {
	other := dev.Ports == 0
	for port := uint32(1); port <= dev.Ports; port++ {
		attrs := append(append(attrU32(attrDevIndex, dev.Index), attrU32(attrPortIndex, port)...), attrU32(attrResLQPN, lqpn)...)
		msgs, err := c.ask(cmdResQPGet, flagRequest, attrs)
		switch {
		case errors.Is(err, unix.ENOENT):
			return QP{}, false, nil
		case errors.Is(err, unix.EAGAIN):
			other = true
			continue
		case err != nil:
			return QP{}, false, fmt.Errorf("reading qp %d of %s: %w", lqpn, dev.Name, err)
		case len(msgs) != 1:
			return QP{}, false, fmt.Errorf("reading qp %d of %s: %d answers to one get", lqpn, dev.Name, len(msgs))
		}
		if q, err = parseQPReply(msgs[0]); err != nil {
			return QP{}, false, fmt.Errorf("reading qp %d of %s: %w", lqpn, dev.Name, err)
		}
		if q.LQPN != lqpn {
			return QP{}, false, fmt.Errorf("reading qp %d of %s: the answer names qp %d", lqpn, dev.Name, q.LQPN)
		}
		return q, true, nil
	}
	if !other {
		return QP{}, false, nil
	}
	qs, err := c.QPs(dev)
	if err != nil {
		return QP{}, false, err
	}
	for _, q := range qs {
		if q.LQPN == lqpn && q.Type != event.QPTypeSMI && q.Type != event.QPTypeGSI {
			return q, true, nil
		}
	}
	return QP{}, false, nil
}

// CMIDs lists the rdma_cm ids of one device.
func (c *Conn) CMIDs(dev Device) ([]CMID, error) {
	msgs, err := c.dump(cmdResCMIDGet, attrU32(attrDevIndex, dev.Index))
	if err != nil {
		return nil, fmt.Errorf("listing cm_ids of %s: %w", dev.Name, err)
	}
	var out []CMID
	for _, m := range msgs {
		cs, err := parseCMIDs(m)
		if err != nil {
			return nil, fmt.Errorf("listing cm_ids of %s: %w", dev.Name, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}

// AllQPs lists the QPs of every device. A device that goes away between
// the two dumps is skipped.
func (c *Conn) AllQPs() ([]QP, error) {
	devs, err := c.Devices()
	if err != nil {
		return nil, err
	}
	var out []QP
	for _, d := range devs {
		qs, err := c.QPs(d)
		if gone(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, qs...)
	}
	return out, nil
}

// gone reports the error of a dump on a device that went away.
func gone(err error) bool { return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENODEV) }

// Snapshot is one reading of every QP and cm_id, stamped with
// CLOCK_BOOTTIME (the clock of the events) taken just before the dump
// (Boot) and just after it (End).
type Snapshot struct {
	Boot  uint64
	End   uint64
	QPs   []QP
	CMIDs []CMID
}

// Read dials, reads every QP and cm_id, fills the comm of user QPs from
// /proc/PID/comm (as the rdma tool does), and closes.
func Read() (Snapshot, error) {
	boot, err := boottime.Read()
	if err != nil {
		return Snapshot{}, err
	}
	c, err := Dial()
	if err != nil {
		return Snapshot{}, err
	}
	defer c.Close()
	devs, err := c.Devices()
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Boot: boot}
	for _, d := range devs {
		qs, err := c.QPs(d)
		if gone(err) {
			continue
		}
		if err != nil {
			return Snapshot{}, err
		}
		cs, err := c.CMIDs(d)
		if err != nil && !gone(err) {
			return Snapshot{}, err
		}
		snap.QPs = append(snap.QPs, qs...)
		snap.CMIDs = append(snap.CMIDs, cs...)
	}
	if snap.End, err = boottime.Read(); err != nil {
		return Snapshot{}, err
	}
	ResolveComms(snap.QPs, ProcComm)
	return snap, nil
}

// ResolveComms fills the comm of user QPs with comm(pid).
func ResolveComms(qps []QP, comm func(pid uint32) string) {
	cache := map[uint32]string{}
	for i := range qps {
		q := &qps[i]
		if q.Kernel || q.PID == 0 || q.Comm != "" {
			continue
		}
		c, ok := cache[q.PID]
		if !ok {
			c = comm(q.PID)
			cache[q.PID] = c
		}
		q.Comm = c
	}
}

// ProcComm reads /proc/PID/comm; "" when the process is gone.
func ProcComm(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

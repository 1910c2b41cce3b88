package rdmanl

import (
	"errors"
	"fmt"
	"sync"
)

// Find reads the QP numbered lqpn on the device named device ("": on every
// device) with a Finder of its own (one socket, one device list, closed
// after).
func Find(device string, lqpn uint32) ([]QP, error) {
	var f Finder
	defer f.Close()
	return f.Find(device, lqpn)
}

// Finder reads single QPs by number, one get per device rather than a dump
// of every table, over one rdma netlink socket kept open, with the device
// list kept between calls. A get names the device by index and its answer
// names the device back, so a list gone stale (a device renamed, removed,
// or added under another index) shows and is read again. Safe for
// concurrent use.
type Finder struct {
	mu   sync.Mutex
	conn *Conn
	devs []Device
}

// errStale says the device list no longer matches the kernel's.
var errStale = errors.New("the device list changed")

// Find reads the QP numbered lqpn on the device named device ("": on every
// device, with the device list read anew) and fills the comm of a user QP
// from /proc/PID/comm. A device that goes away meanwhile is skipped; no
// row and no error: no such QP.
func (f *Finder) Find(device string, lqpn uint32) ([]QP, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fresh := device == "" || f.devs == nil
	for {
		if fresh {
			if err := f.refresh(); err != nil {
				return nil, err
			}
		}
		out, err := f.find(device, lqpn)
		switch {
		case errors.Is(err, errStale) && !fresh:
			fresh = true
			continue
		case errors.Is(err, errStale):
			// Listed just now and gone or renamed already: no such QP.
			return nil, nil
		case err != nil:
			f.drop() // the next call starts on a new socket
			return nil, err
		}
		ResolveComms(out, ProcComm)
		return out, nil
	}
}

// drop closes the socket and forgets the device list.
func (f *Finder) drop() {
	if f.conn != nil {
		f.conn.Close()
	}
	f.conn, f.devs = nil, nil
}

// Close closes the socket; a later Find opens another.
func (f *Finder) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop()
	return nil
}

// refresh dials if needed and reads the device list.
func (f *Finder) refresh() error {
	if f.conn == nil {
		c, err := Dial()
		if err != nil {
			return err
		}
		f.conn = c
	}
	devs, err := f.conn.Devices()
	if err != nil {
		f.drop()
		return err
	}
	f.devs = devs
	return nil
}

// find gets the QP on the listed devices; errStale when a named device is
// not listed, or a listed one answers as gone or under another name.
func (f *Finder) find(device string, lqpn uint32) ([]QP, error) {
	var out []QP
	named := false
	for _, d := range f.devs {
		if device != "" && d.Name != device {
			continue
		}
		named = true
		q, ok, err := f.conn.QP(d, lqpn)
		switch {
		case gone(err):
			if device != "" {
				return nil, errStale
			}
			continue
		case err != nil:
			return nil, err
		case ok && q.Device != d.Name:
			return nil, fmt.Errorf("device %d answers as %q, listed as %q: %w", d.Index, q.Device, d.Name, errStale)
		case ok:
			out = append(out, q)
		}
	}
	if device != "" && !named {
		return nil, errStale
	}
	return out, nil
}

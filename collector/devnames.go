package collector

import (
	"time"

	"github.com/apmwatch/apmwatch/rdmanl"
)

// maxDevNames bounds the index -> name table (indexes are never reused
// while the host runs; a host that registers devices without end only
// makes the table start over).
const maxDevNames = 4096

// devNames resolves the device indexes the probes send (ib_device.index)
// to names. The probes send a device's index and name when it registers
// or is renamed (APM_KIND_DEV_NAME), in order with the records that
// follow; devices that were there before the probes, or whose record was
// lost, are listed over rdma netlink, at most once a second for an index
// still unknown.
type devNames struct {
	names map[uint32]string
	tried map[uint32]time.Time // unknown index -> when it was last listed for
	list  func() ([]rdmanl.Device, error)
	now   func() time.Time
}

// newDevNames starts with the devices list gives (nil: none, never listed).
func newDevNames(list func() ([]rdmanl.Device, error)) *devNames {
	d := &devNames{names: map[uint32]string{}, tried: map[uint32]time.Time{}, list: list, now: time.Now}
	d.refresh()
	return d
}

// listDevices lists the RDMA devices over rdma netlink.
func listDevices() ([]rdmanl.Device, error) {
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Devices()
}

func (d *devNames) refresh() {
	if d.list == nil {
		return
	}
	devs, err := d.list()
	if err != nil {
		return
	}
	for _, dv := range devs {
		d.set(dv.Index, dv.Name)
	}
}

// set records a device's name (registered, renamed or listed).
func (d *devNames) set(idx uint32, name string) {
	if _, ok := d.names[idx]; !ok && len(d.names) >= maxDevNames {
		clear(d.names)
	}
	d.names[idx] = name
	delete(d.tried, idx)
}

// name returns the name of device idx, or "" when it is not known.
func (d *devNames) name(idx uint32) string {
	if n, ok := d.names[idx]; ok {
		return n
	}
	if d.list == nil {
		return ""
	}
	now := d.now()
	if t, ok := d.tried[idx]; ok && now.Sub(t) < time.Second {
		return ""
	}
	if len(d.tried) >= maxDevNames {
		clear(d.tried)
	}
	d.tried[idx] = now
	d.refresh()
	return d.names[idx]
}

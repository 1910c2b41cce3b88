package rdmanl

import (
	"testing"
)

// On a host without RDMA the socket may not exist; where it does, listing
// must work without privilege.
func TestReadHost(t *testing.T) {
	c, err := Dial()
	if err != nil {
		t.Skipf("no rdma netlink here: %v", err)
	}
	defer c.Close()
	devs, err := c.Devices()
	if err != nil {
		t.Skipf("rdma netlink does not answer here: %v", err)
	}
	snap, err := Read()
	if err != nil {
		t.Fatalf("%d devices, but reading qps: %v", len(devs), err)
	}
	if len(devs) == 0 && len(snap.QPs) != 0 {
		t.Errorf("qps without devices: %+v", snap.QPs)
	}
	if snap.Boot == 0 {
		t.Error("no boot time on the snapshot")
	}
}

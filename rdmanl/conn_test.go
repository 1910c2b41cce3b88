package rdmanl

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// A kernel without ib_core has no NETLINK_RDMA: the error says so in the
// tool's words, not the socket's.
func TestNoNetlinkSaysWhy(t *testing.T) {
	err := socketError(unix.EPROTONOSUPPORT)
	if !errors.Is(err, ErrNoNetlink) || !strings.Contains(err.Error(), "ib_core is not loaded") || strings.Contains(err.Error(), "protocol not supported") {
		t.Errorf("EPROTONOSUPPORT: %v", err)
	}
	if err := socketError(unix.EMFILE); errors.Is(err, ErrNoNetlink) || !strings.Contains(err.Error(), "opening rdma netlink socket") {
		t.Errorf("EMFILE: %v", err)
	}
}

// Package rdmanl reads the kernel's per-QP resource table over rdma
// netlink (NETLINK_RDMA, client RDMA_NL_NLDEV), what `rdma resource show qp`
// prints: device, port, local and remote QPN, type, state, path-migration
// state, PSNs, owner. It is the ground truth the APM model compares its
// belief with, and it needs no BPF. Feeder turns snapshots into
// ground-truth events (event.KindTruth) for the model and the stream;
// Merge polls on an interval and puts them into a live event source.
//
// Protocol (include/uapi/rdma/rdma_netlink.h, drivers/infiniband/core/nldev.c):
// a dump of RDMA_NLDEV_CMD_GET lists the devices; a dump of
// RDMA_NLDEV_CMD_RES_QP_GET must name one device (RDMA_NLDEV_ATTR_DEV_INDEX)
// and answers with messages holding DEV_INDEX, DEV_NAME and a nested
// RES_QP table of nested RES_QP_ENTRY rows. The message type is
// RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd) = 5<<10 + cmd; there is no family
// header before the attributes.
package rdmanl

import (
	"github.com/apmwatch/apmwatch/event"
)

// Device is one RDMA device.
type Device struct {
	Index uint32 `json:"ifindex"`
	Name  string `json:"ifname"`
	// Ports is the device's last port number (fill_dev_info's PORT_INDEX,
	// rdma_end_port); 0 when not given.
	Ports uint32 `json:"-"`
}

// QP is one row of the QP resource table. Fields the kernel leaves out for
// a QP are zero, with a Has flag where zero is a valid value.
type QP struct {
	DevIndex   uint32         `json:"ifindex"`
	Device     string         `json:"ifname"`
	Port       uint32         `json:"port,omitempty"` // 0: not set yet (the kernel omits it)
	LQPN       uint32         `json:"lqpn"`
	RQPN       uint32         `json:"rqpn,omitempty"` // RC and UC only
	Type       event.QPType   `json:"type"`
	State      event.QPState  `json:"state"`
	RQPSN      uint32         `json:"rq-psn,omitempty"` // RC and UC only
	SQPSN      uint32         `json:"sq-psn"`
	PathMig    event.MigState `json:"path-mig-state"`
	HasPathMig bool           `json:"-"`              // RC, UC and XRC only
	HasRemote  bool           `json:"-"`              // RQPN and RQPSN present (RC, UC)
	PID        uint32         `json:"pid,omitempty"`  // user QPs
	Comm       string         `json:"comm,omitempty"` // kernel QPs: the kernel's name; user QPs: /proc/PID/comm when resolved
	Kernel     bool           `json:"-"`              // created by a kernel ULP
	PDN        uint32         `json:"pdn,omitempty"`  // user QPs, newer kernels
}

// Netlink numbers, verified against include/uapi/rdma/rdma_netlink.h (the
// attribute enum is ABI: "don't change the order or add anything between").
const (
	nlNLDEV = 5 // RDMA_NL_NLDEV

	cmdGet      = 1  // RDMA_NLDEV_CMD_GET
	cmdResQPGet = 10 // RDMA_NLDEV_CMD_RES_QP_GET

	attrDevIndex     = 1                              // u32
	attrDevName      = 2                              // string
	attrPortIndex    = 3                              // u32
	attrResQP        = 19                             // nested table
	attrResQPEntry   = 20                             // nested
	attrResLQPN      = 21                             // u32
	attrResRQPN      = 22                             // u32
	attrResRQPSN     = 23                             // u32
	attrResSQPSN     = 24                             // u32
	attrResPathMig   = 25                             // u8
	attrResType      = 26                             // u8
	attrResState     = 27                             // u8
	attrResPID       = 28                             // u32
	attrResKernName  = 29                             // string
	attrResPDN       = 60                             // u32, RDMA_NLDEV_ATTR_RES_PDN
	nlaTypeMask      = ^uint16(1<<15 | 1<<14 | 1<<13) // RDMA_NLA_TYPE_MASK: no NESTED, NET_BYTEORDER, MANDATORY
	rdmaNLTypeNLDEV0 = nlNLDEV << 10
)

// msgType is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
func msgType(op uint16) uint16 { return rdmaNLTypeNLDEV0 + op }

package rdmanl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/apmwatch/apmwatch/event"
)

// Netlink framing (linux/netlink.h).
const (
	nlmsgHdrLen = 16
	nlaHdrLen   = 4
	nlmsgNoop   = 1
	nlmsgError  = 2
	nlmsgDone   = 3
	flagRequest = 0x1
	flagMulti   = 0x2
	flagDump    = 0x300 // NLM_F_ROOT | NLM_F_MATCH
)

var ne = binary.NativeEndian

func align4(n int) int { return (n + 3) &^ 3 }

// message is one netlink message: its header fields and payload.
type message struct {
	typ   uint16
	flags uint16
	seq   uint32
	data  []byte
}

// splitMessages cuts a datagram into netlink messages.
func splitMessages(b []byte) ([]message, error) {
	var out []message
	for len(b) >= nlmsgHdrLen {
		n := int(ne.Uint32(b[0:4]))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("netlink message length %d of %d bytes", n, len(b))
		}
		out = append(out, message{typ: ne.Uint16(b[4:6]), flags: ne.Uint16(b[6:8]),
			seq: ne.Uint32(b[8:12]), data: b[nlmsgHdrLen:n]})
		if a := align4(n); a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
	}
	if len(b) != 0 {
		return out, fmt.Errorf("netlink trailing %d bytes", len(b))
	}
	return out, nil
}

// errnoOf decodes the payload of NLMSG_ERROR or NLMSG_DONE: a negative
// errno, or 0 (an ack, or a clean end of dump).
func errnoOf(data []byte) error {
	if len(data) < 4 {
		return nil
	}
	if e := int32(ne.Uint32(data[0:4])); e < 0 {
		return syscall.Errno(-e)
	}
	return nil
}

// forAttrs calls fn for each attribute in b, with the flag bits masked off
// the type.
func forAttrs(b []byte, fn func(typ uint16, data []byte) error) error {
	for len(b) >= nlaHdrLen {
		n := int(ne.Uint16(b[0:2]))
		if n < nlaHdrLen || n > len(b) {
			return fmt.Errorf("netlink attribute length %d of %d bytes", n, len(b))
		}
		if err := fn(ne.Uint16(b[2:4])&nlaTypeMask, b[nlaHdrLen:n]); err != nil {
			return err
		}
		if a := align4(n); a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("netlink attribute trailing %d bytes", len(b))
	}
	return nil
}

var errShort = errors.New("attribute too short")

func u32(d []byte) (uint32, error) {
	if len(d) < 4 {
		return 0, errShort
	}
	return ne.Uint32(d), nil
}

func u8(d []byte) (uint8, error) {
	if len(d) < 1 {
		return 0, errShort
	}
	return d[0], nil
}

// str reads an NLA_NUL_STRING.
func str(d []byte) string {
	for i, c := range d {
		if c == 0 {
			return string(d[:i])
		}
	}
	return string(d)
}

// parseDevice decodes one RDMA_NLDEV_CMD_GET answer.
func parseDevice(payload []byte) (Device, error) {
	var d Device
	err := forAttrs(payload, func(typ uint16, data []byte) error {
		var err error
		switch typ {
		case attrDevIndex:
			d.Index, err = u32(data)
		case attrDevName:
			d.Name = str(data)
		case attrPortIndex:
			d.Ports, err = u32(data)
		}
		return err
	})
	if err != nil {
		return d, fmt.Errorf("decoding device: %w", err)
	}
	if d.Name == "" {
		return d, errors.New("decoding device: no name")
	}
	return d, nil
}

// parseQPs decodes one RDMA_NLDEV_CMD_RES_QP_GET answer: the device, then
// the nested table of QP rows.
func parseQPs(payload []byte) ([]QP, error) {
	return parseTable(payload, "qp", attrResQP, attrResQPEntry, parseQP, func(q *QP, d Device) {
		q.DevIndex, q.Device = d.Index, d.Name
	})
}

// parseQPReply decodes the answer to a get of one QP (no dump): the
// device's index and name and the QP's attributes side by side at the top
// level, as res_get_common_doit writes them (no table, no entry nest).
func parseQPReply(payload []byte) (QP, error) {
	dev, err := parseDevice(payload) // its Ports is the QP's port here: unused
	if err != nil {
		return QP{}, fmt.Errorf("decoding qp message: %w", err)
	}
	q, err := parseQP(payload)
	if err != nil {
		return QP{}, fmt.Errorf("decoding qp of %s: %w", dev.Name, err)
	}
	q.DevIndex, q.Device = dev.Index, dev.Name
	return q, nil
}

// parseTable decodes one resource dump answer (QPs, cm_ids): the device's
// index and name, then a nested table of rows of type entryAttr, each
// decoded by parseRow and stamped with the device by setDev. what names the
// resource in errors.
func parseTable[T any](payload []byte, what string, tableAttr, entryAttr uint16, parseRow func([]byte) (T, error), setDev func(*T, Device)) ([]T, error) {
	var (
		dev   Device
		table []byte
	)
	err := forAttrs(payload, func(typ uint16, data []byte) error {
		var err error
		switch typ {
		case attrDevIndex:
			dev.Index, err = u32(data)
		case attrDevName:
			dev.Name = str(data)
		case tableAttr:
			table = data
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("decoding %s message: %w", what, err)
	}
	var out []T
	err = forAttrs(table, func(typ uint16, data []byte) error {
		if typ != entryAttr {
			return nil
		}
		row, err := parseRow(data)
		if err != nil {
			return err
		}
		setDev(&row, dev)
		out = append(out, row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding %s table of %s: %w", what, dev.Name, err)
	}
	return out, nil
}

// parseQP decodes one RES_QP_ENTRY, as fill_res_qp_entry writes it.
func parseQP(entry []byte) (QP, error) {
	var q QP
	seen := false
	err := forAttrs(entry, func(typ uint16, data []byte) error {
		var (
			err error
			v   uint8
		)
		switch typ {
		case attrPortIndex:
			q.Port, err = u32(data)
		case attrResLQPN:
			q.LQPN, err = u32(data)
			seen = true
		case attrResRQPN:
			q.RQPN, err = u32(data)
			q.HasRemote = true
		case attrResRQPSN:
			q.RQPSN, err = u32(data)
		case attrResSQPSN:
			q.SQPSN, err = u32(data)
		case attrResPathMig:
			v, err = u8(data)
			q.PathMig, q.HasPathMig = event.MigState(v), true
		case attrResType:
			v, err = u8(data)
			q.Type = event.QPType(v)
		case attrResState:
			v, err = u8(data)
			q.State = event.QPState(v)
		case attrResPID:
			q.PID, err = u32(data)
		case attrResKernName:
			q.Comm, q.Kernel = str(data), true
		case attrResPDN:
			q.PDN, err = u32(data)
		}
		if err != nil {
			return fmt.Errorf("attribute %d: %w", typ, err)
		}
		return nil
	})
	if err == nil && !seen {
		err = errors.New("qp entry without lqpn")
	}
	return q, err
}

// request builds a dump request for op with attributes.
func request(op uint16, seq uint32, attrs []byte) []byte {
	return requestFlags(op, flagRequest|flagDump, seq, attrs)
}

// requestFlags builds a request for op with the given header flags: a dump
// (flagDump) or a get of one object (flagRequest alone).
func requestFlags(op, flags uint16, seq uint32, attrs []byte) []byte {
	b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(attrs))
	ne.PutUint32(b[0:4], uint32(nlmsgHdrLen+len(attrs)))
	ne.PutUint16(b[4:6], msgType(op))
	ne.PutUint16(b[6:8], flags)
	ne.PutUint32(b[8:12], seq)
	return append(b, attrs...)
}

// attrU32 encodes one u32 attribute.
func attrU32(typ uint16, v uint32) []byte {
	b := make([]byte, 8)
	ne.PutUint16(b[0:2], 8)
	ne.PutUint16(b[2:4], typ)
	ne.PutUint32(b[4:8], v)
	return b
}

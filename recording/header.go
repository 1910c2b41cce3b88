package recording

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// Format versions. A file states the version it was written with and the
// oldest version a reader must understand to read it; a reader refuses files
// whose compat version is newer than FormatVersion. Additive changes (new
// record or frame types, fields appended to a record) keep compat at 1.
const (
	FormatVersion = 1
	compatVersion = 1
)

// Header is what a file says about itself: the recorded source's event.Meta
// and where the file sits in a recording session.
type Header struct {
	Version uint16 // format version the file was written with
	Compat  uint16 // oldest format version that can read it

	// Session identifies one run of a writer; rotated segments of the same
	// run share it and are numbered from 0 by Segment.
	Session uint64
	Segment uint32
	Created time.Time // when this file was created (wall clock)

	Meta event.Meta
}

func appendHeader(b []byte, h *Header) []byte {
	b = binary.LittleEndian.AppendUint16(b, h.Version)
	b = binary.LittleEndian.AppendUint16(b, h.Compat)
	b = binary.LittleEndian.AppendUint64(b, h.Session)
	b = binary.AppendUvarint(b, uint64(h.Segment))
	b = binary.AppendVarint(b, h.Created.UnixNano())
	m := &h.Meta
	b = appendStr(b, m.Host)
	b = appendStr(b, m.Kernel)
	b = binary.AppendVarint(b, int64(m.BootOffset))
	b = appendStr(b, m.Version)
	b = binary.AppendUvarint(b, uint64(len(m.Hooks)))
	for _, k := range m.Hooks {
		b = appendStr(b, k.Name)
		b = appendStr(b, k.Module)
		b = appendStr(b, k.Signal)
		b = appendStr(b, string(k.Method))
		b = appendStr(b, k.Reason)
	}
	// Appended fields: readers that predate them stop after the hooks.
	b = appendStr(b, m.BootID)
	ports := m.Ports
	if len(ports) > event.MaxPortAddrs {
		ports = ports[:event.MaxPortAddrs]
	}
	b = binary.AppendUvarint(b, uint64(len(ports)))
	for _, p := range ports {
		b = appendStr(b, p.Device)
		b = binary.AppendUvarint(b, uint64(p.Port))
		b = binary.AppendUvarint(b, uint64(p.LID))
		gids := p.GIDs
		if len(gids) > event.MaxPortGIDs {
			gids = gids[:event.MaxPortGIDs]
		}
		b = binary.AppendUvarint(b, uint64(len(gids)))
		for _, g := range gids {
			b = append(b, g[:]...)
		}
	}
	// Appended later: each port's LMC, in the order of the ports (readers
	// that predate it stop after the ports; its absence reads LMC 0).
	b = binary.AppendUvarint(b, uint64(len(ports)))
	for _, p := range ports {
		b = append(b, p.LMC)
	}
	return b
}

// decodePorts reads the fields appended after the hooks, when present.
func decodePorts(d *dec, m *event.Meta) {
	if len(d.b) == 0 {
		return // written before these fields existed
	}
	m.BootID = d.text()
	n := d.uvarint()
	if n > event.MaxPortAddrs || n > uint64(len(d.b))/4 {
		d.fail(fmt.Errorf("%d port addresses", n))
		return
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		p := event.PortAddr{Device: d.text(), Port: d.u32(), LID: d.u16()}
		g := d.uvarint()
		if g > event.MaxPortGIDs {
			d.fail(fmt.Errorf("port with %d gids", g))
			return
		}
		for j := uint64(0); j < g && d.err == nil; j++ {
			var gid [16]byte
			copy(gid[:], d.bytes(16))
			p.GIDs = append(p.GIDs, gid)
		}
		m.Ports = append(m.Ports, p)
	}
	if d.err != nil || len(d.b) == 0 {
		return // written before the LMCs were
	}
	n = d.uvarint()
	if n != uint64(len(m.Ports)) || n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("%d port LMCs for %d ports", n, len(m.Ports)))
		return
	}
	for i := range m.Ports {
		m.Ports[i].LMC = d.u8() // as recorded: its reader bounds it (connid.PortLID)
	}
}

func decodeHeader(body []byte) (*Header, error) {
	if len(body) > maxRecord {
		return nil, fmt.Errorf("header of %d bytes, more than %d", len(body), maxRecord)
	}
	d := dec{b: body}
	h := &Header{Version: d.u16le(), Compat: d.u16le()}
	if d.err == nil && h.Compat > FormatVersion {
		return nil, fmt.Errorf("format version %d needs a newer apmwatch (this one reads version %d)", h.Version, FormatVersion)
	}
	h.Session = d.u64le()
	h.Segment = d.u32()
	h.Created = time.Unix(0, d.varint())
	m := &h.Meta
	m.Host = d.text()
	m.Kernel = d.text()
	m.BootOffset = time.Duration(d.varint())
	m.Version = d.text()
	n := d.uvarint()
	if n > uint64(len(d.b))/5 { // five strings of at least one byte each
		return nil, fmt.Errorf("header: %d hooks: %w", n, errShort)
	}
	if n > maxHooks {
		return nil, fmt.Errorf("header: %d hooks, more than %d", n, maxHooks)
	}
	for i := uint64(0); i < n; i++ {
		m.Hooks = append(m.Hooks, event.Hook{
			Name:   d.text(),
			Module: d.text(),
			Signal: d.text(),
			Method: event.HookMethod(d.text()),
			Reason: d.text(),
		})
	}
	if d.err == nil {
		decodePorts(&d, m)
	}
	if d.err != nil {
		return nil, fmt.Errorf("header: %w", d.err)
	}
	return h, nil
}

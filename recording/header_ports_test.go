package recording

import (
	"reflect"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// TestHeaderPorts: the boot identity and the port addresses (with their
// LMC) round-trip; a header written before they existed reads with them
// unknown, one written before the LMCs with LMC 0; a header claiming more
// ports or GIDs than the bounds, or LMCs for other ports, is refused.
func TestHeaderPorts(t *testing.T) {
	gid := [16]byte{0xfe, 0x80, 15: 1}
	h := &Header{Version: FormatVersion, Compat: compatVersion, Session: 7, Meta: event.Meta{
		Host: "a", Kernel: "6.12", BootID: "b00t",
		Ports: []event.PortAddr{{Device: "mlx5_0", Port: 1, LID: 0x10, LMC: 2, GIDs: [][16]byte{gid}}, {Device: "mlx5_1", Port: 1, LID: 0x13}},
	}}
	got, err := decodeHeader(appendHeader(nil, h))
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.BootID != "b00t" || !reflect.DeepEqual(got.Meta.Ports, h.Meta.Ports) {
		t.Fatalf("round trip: boot %q ports %+v", got.Meta.BootID, got.Meta.Ports)
	}

	old := *h
	old.Meta.BootID, old.Meta.Ports = "", nil
	b := appendHeader(nil, &old)
	b = b[:len(b)-3] // an older writer stopped after the hooks (empty boot id, zero ports, zero LMCs)
	got, err = decodeHeader(b)
	if err != nil || got.Meta.BootID != "" || got.Meta.Ports != nil {
		t.Fatalf("older header: %v %+v", err, got)
	}

	noLMC := appendHeader(nil, h)
	noLMC = noLMC[:len(noLMC)-3] // a writer before the LMCs: two ports, then nothing
	got, err = decodeHeader(noLMC)
	if err != nil || len(got.Meta.Ports) != 2 || got.Meta.Ports[0].LMC != 0 || got.Meta.Ports[0].LID != 0x10 {
		t.Fatalf("header without LMCs: %v %+v", err, got)
	}
	other := append(appendHeader(nil, h)[:len(noLMC)], 1, 2) // one LMC for two ports
	if _, err := decodeHeader(other); err == nil {
		t.Fatal("a header with LMCs for other ports was read")
	}

	big := *h
	big.Meta.Ports = make([]event.PortAddr, event.MaxPortAddrs+5)
	got, err = decodeHeader(appendHeader(nil, &big))
	if err != nil || len(got.Meta.Ports) != event.MaxPortAddrs {
		t.Fatalf("writer bounds the ports: %v, %d", err, len(got.Meta.Ports))
	}
	forged := appendHeader(nil, &old)
	forged = append(forged[:len(forged)-2], 0xff, 0xff, 0x03) // a port count past the bound
	if _, err := decodeHeader(forged); err == nil {
		t.Fatal("a header claiming 65535 ports was read")
	}
}

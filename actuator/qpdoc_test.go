package actuator

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// `qp show -o json` is one document: the row, and the owner's view with
// every enum as a name (the state, the mig state, the MTU in bytes, the
// GID as an address).
func TestShowDocNamesEnums(t *testing.T) {
	row := Row{Device: "ibsim0", Port: 1, QPN: 17, RQPN: 18, Type: "RC", State: "RTS", Mig: "MIGRATED", PID: 42, Comm: "app"}
	before := &Attr{State: 3, PathMigState: 0, PathMTU: 5, DestQPN: 18, SQPSN: 7, RQPSN: 9, PortNum: 1, Timeout: 14,
		AltPortNum: 2, AltTimeout: 14, AltPKeyIndex: 0,
		Dest:    Dest{DLID: 3, SL: 0, PortNum: 1},
		AltDest: Dest{DLID: 4, PortNum: 2, IsGlobal: true, DGID: [16]byte{0xfe, 0x80, 15: 1}, SGIDIndex: 0, HopLimit: 1}}
	doc := NewShowDoc(row, &Result{Op: OpQuery, Target: Target{PID: 42, Device: "ibsim0", QPN: 17, Handle: 3}, Before: before})
	var b bytes.Buffer
	if err := WriteDoc(&b, doc); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 1 {
		t.Fatalf("%d lines, want one document:\n%s", n, b.String())
	}
	var got struct {
		Schema int            `json:"schema"`
		QP     map[string]any `json:"qp"`
		Owner  struct {
			State   string `json:"qp_state"`
			Mig     string `json:"path_mig_state"`
			MTU     int    `json:"path_mtu"`
			Primary struct {
				Port int `json:"port"`
				DLID int `json:"dlid"`
			} `json:"primary"`
			Alt struct {
				Port int    `json:"port"`
				DLID int    `json:"dlid"`
				DGID string `json:"dgid"`
			} `json:"alt"`
			Target struct {
				Handle int `json:"handle"`
			} `json:"target"`
		} `json:"owner_view"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	o := got.Owner
	if got.Schema != 1 || got.QP["path_mig_state"] != "MIGRATED" || got.QP["qpn"] != 17.0 ||
		o.State != "RTS" || o.Mig != "MIGRATED" || o.MTU != 4096 || o.Primary.Port != 1 || o.Primary.DLID != 3 ||
		o.Alt.Port != 2 || o.Alt.DLID != 4 || o.Alt.DGID != "fe80::1" || o.Target.Handle != 3 {
		t.Errorf("document %s", b.String())
	}
	// a kernel QP: the row alone
	k := NewShowDoc(Row{Device: "ibsim0", QPN: 5, Kernel: true}, nil)
	if k.Owner != nil || k.Schema != 1 {
		t.Errorf("kernel QP document %+v", k)
	}
}

// `qp list -o json` is one document; no QP is an empty list, not null.
func TestListDocIsOneDocument(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDoc(&b, ListDoc{Schema: DocSchema, QPs: []Row{}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(b.String()); got != `{"schema":1,"qps":[]}` {
		t.Errorf("empty list: %s", got)
	}
}

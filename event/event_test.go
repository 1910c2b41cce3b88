package event

import "testing"

func TestKindNamesRoundTrip(t *testing.T) {
	for _, k := range Kinds() {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Fatalf("ParseKind(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
	}
	if _, err := ParseKind("unknown"); err == nil {
		t.Fatal("ParseKind(unknown) must fail: it is not a real kind")
	}
}

func TestParseEventType(t *testing.T) {
	cases := map[string]EventType{
		"PATH_MIG": EvPathMig, "path_mig": EvPathMig, "path-mig-err": EvPathMigErr,
		"comm_est": EvCommEst, "7": EvPathMigErr, "19": EvWQFatal, "42": EventType(42),
	}
	for in, want := range cases {
		got, err := ParseEventType(in)
		if err != nil || got != want {
			t.Errorf("ParseEventType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "mig", "300", "-1", "6x"} {
		if _, err := ParseEventType(bad); err == nil {
			t.Errorf("ParseEventType(%q) accepted bad input", bad)
		}
	}
}

// The numeric values are the kernel's ABI (ib_verbs.h): a wrong one would
// make every decoded event lie.
func TestABIValues(t *testing.T) {
	if AttrAltPath != 0x4000 || AttrPathMigState != 0x40000 || AttrDestQPN != 1<<20 || AttrAV != 1<<7 {
		t.Fatal("attribute mask bits drifted from ib_verbs.h")
	}
	if EvPathMig != 6 || EvPathMigErr != 7 || EvCommEst != 4 || EvPortActive != 9 {
		t.Fatal("ib_event_type values drifted from ib_verbs.h")
	}
	if MigMigrated != 0 || MigRearm != 1 || MigArmed != 2 {
		t.Fatal("ib_mig_state values drifted")
	}
	if CMAttrLAP != 0x19 || CMAttrAPR != 0x1A || MgmtClassCM != 0x07 {
		t.Fatal("CM MAD ids drifted")
	}
}

func TestSameRoute(t *testing.T) {
	a := Path{Port: 1, DLID: 5}
	if !a.SameRoute(Path{Port: 1, DLID: 5, Timeout: 14}) {
		t.Error("timeout is not part of the route")
	}
	if a.SameRoute(Path{Port: 2, DLID: 5}) || a.SameRoute(Path{Port: 1, DLID: 6}) {
		t.Error("different port or DLID is a different route")
	}
	if a.SameRoute(Path{Port: 1, DLID: 5, SrcPathBits: 1}) {
		t.Error("different source path bits (another SLID under an LMC) is a different route")
	}
	g1 := Path{Port: 1, IsGlobal: true, DGID: [16]byte{15: 1}}
	g2 := Path{Port: 1, IsGlobal: true, DGID: [16]byte{15: 2}}
	if g1.SameRoute(g2) {
		t.Error("different DGID on a global route is a different route")
	}
}

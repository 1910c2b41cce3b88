package fabric

import (
	"os"
	"strings"
	"testing"
)

// fixture reads a file of testdata/fattree (real output, see testdata/README.md).
func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/fattree/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fattree(t testing.TB) (*Topology, LFTs) {
	t.Helper()
	topo, err := ParseTopology(strings.NewReader(fixture(t, "ibnetdiscover.out")), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	lfts, err := ParseLFTs(strings.NewReader(fixture(t, "dump_lfts.out")), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return topo, lfts
}

// The fixture's GUIDs.
const (
	spine1 GUID = 0x200000
	spine2 GUID = 0x200001
	leaf1  GUID = 0x200002
	leaf4  GUID = 0x200005
	h1     GUID = 0x100000
	h7     GUID = 0x10000c
	h8     GUID = 0x10000e
)

// editSwitch replaces, in the forwarding table of the switch named by its
// header's "(name)", the line of lid (4 hex digits) with one to port;
// port "" drops the line.
func editSwitch(t testing.TB, dump, name, lid, port string) string {
	t.Helper()
	start := strings.Index(dump, "("+name+"):")
	if start < 0 {
		t.Fatalf("no switch %s in the dump", name)
	}
	i := strings.Index(dump[start:], "\n0x"+lid+" ")
	if i < 0 {
		t.Fatalf("no lid %s at %s", lid, name)
	}
	i += start + 1
	if port == "" { // drop the line
		j := strings.Index(dump[i:], "\n")
		return dump[:i] + dump[i+j+1:]
	}
	return dump[:i] + "0x" + lid + " " + port + dump[i+len("0x"+lid+" 000"):]
}

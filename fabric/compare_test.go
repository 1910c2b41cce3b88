package fabric

import (
	"strconv"
	"strings"
	"testing"
)

func sharedText(s []Element) string {
	var out []string
	for _, e := range s {
		if e.Switch != nil {
			out = append(out, e.Switch.Name)
		} else {
			out = append(out, e.Link[0].Name+":"+strconv.Itoa(e.Link[0].Port)+"-"+e.Link[1].Name+":"+strconv.Itoa(e.Link[1].Port))
		}
	}
	return strings.Join(out, " ")
}

func TestSharedFixture(t *testing.T) {
	topo, lfts := fattree(t)
	for _, c := range []struct {
		name             string
		q                Query
		shared           string
		sameSrc, sameDst bool
	}{
		// H7's two LMC LIDs: up different spines; only the two leaves shared.
		{"lmc alias, disjoint spines", Query{From: 2, To: 22, Alt: 23}, "Leaf1 Leaf4", true, true},
		// H7's first LID and H8's second: both up Spine1.
		{"another port, same spine", Query{From: 2, To: 22, Alt: 25}, "Leaf1 Leaf1:7-Spine1:1 Spine1 Spine1:4-Leaf4:7 Leaf4", true, false},
		// Another source port too (H2, lid 9), to H7's second LID.
		{"other source", Query{From: 2, To: 22, Alt: 23, AltFrom: 9}, "Leaf1 Leaf4", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Routes(topo, lfts, c.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := sharedText(rep.Shared); got != c.shared {
				t.Errorf("shared %q, want %q", got, c.shared)
			}
			if same := rep.Ends.Source[0] == rep.Ends.Source[1]; same != c.sameSrc {
				t.Errorf("same source %v: %+v", same, rep.Ends.Source)
			}
			if same := rep.Ends.Destination[0] == rep.Ends.Destination[1]; same != c.sameDst {
				t.Errorf("same destination %v: %+v", same, rep.Ends.Destination)
			}
		})
	}
}

func TestSharedDisjointLeaves(t *testing.T) {
	// H1 to H7 and H2 (lid 8) to H3 (lid 13): only Leaf1, which both sources hang off.
	topo, lfts := fattree(t)
	rep, err := Routes(topo, lfts, Query{From: 2, To: 22, Alt: 13, AltFrom: 8})
	if err != nil {
		t.Fatal(err)
	}
	if got := sharedText(rep.Shared); got != "Leaf1" {
		t.Fatalf("shared %q, want Leaf1 only (H1 and H2 hang off it)", got)
	}
	// H3 (lid 12) to H7 and H5 (lid 18) to H2 (lid 8): nothing in common.
	rep, err = Routes(topo, lfts, Query{From: 12, To: 22, Alt: 8, AltFrom: 18})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Shared) != 0 {
		t.Fatalf("shared %q, want nothing (Leaf2-Spine1-Leaf4 and Leaf3-Spine2-Leaf1)", sharedText(rep.Shared))
	}
}

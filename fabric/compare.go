package fabric

// Element is a switch or a link two routes both cross.
type Element struct {
	Switch *PortRef    // a switch (Port 0)
	Link   *[2]PortRef // a link, in the first route's direction
}

// Ends are the end ports of two routes, listed apart from what they share:
// an end port and its link are crossed by every route that starts or ends
// there, whatever the forwarding tables say.
type Ends struct {
	Source      [2]PortRef // of the first route, of the second
	Destination [2]PortRef
}

// Shared lists the switches and links both routes cross, in the first
// route's order, the links to and from their end ports left out (Ends
// holds the end ports).
func Shared(a, b Route) ([]Element, Ends) {
	ends := Ends{Source: [2]PortRef{a.Source, b.Source}, Destination: [2]PortRef{a.Destination, b.Destination}}
	inB := map[GUID]bool{}
	linksB := map[[2]End]bool{}
	for _, l := range links(b) {
		linksB[l] = true
		linksB[[2]End{l[1], l[0]}] = true
	}
	for _, h := range b.Hops {
		inB[h.GUID] = true
	}
	var shared []Element
	for i, h := range a.Hops {
		if i > 0 {
			prev := a.Hops[i-1]
			l := [2]End{{prev.GUID, prev.OutPort}, {h.GUID, h.InPort}}
			if linksB[l] {
				shared = append(shared, Element{Link: &[2]PortRef{
					{GUID: prev.GUID, Name: prev.Name, Port: prev.OutPort},
					{GUID: h.GUID, Name: h.Name, Port: h.InPort}}})
			}
		}
		if inB[h.GUID] {
			shared = append(shared, Element{Switch: &PortRef{GUID: h.GUID, Name: h.Name}})
		}
	}
	return shared, ends
}

// links are the switch-to-switch links a route crosses.
func links(r Route) [][2]End {
	var l [][2]End
	for i := 1; i < len(r.Hops); i++ {
		l = append(l, [2]End{{r.Hops[i-1].GUID, r.Hops[i-1].OutPort}, {r.Hops[i].GUID, r.Hops[i].InPort}})
	}
	return l
}

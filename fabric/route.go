package fabric

import (
	"fmt"
)

// MaxHops bounds a walk: no unicast route of a real fabric crosses more
// switches (the directed-route limit of a subnet is 64 hops).
const MaxHops = 64

// Hop is a switch a route crosses: the port it enters by and the port its
// forwarding table sends the destination LID out of.
type Hop struct {
	GUID    GUID
	Name    string // the topology's NodeDescription, as read
	InPort  int    // 0: the route starts at this switch
	OutPort int    // 0: the route ends at this switch
}

// PortRef is a node's port.
type PortRef struct {
	GUID GUID
	Name string
	Port int
}

// Route is a unicast route from a source LID to a destination LID.
type Route struct {
	From, To    uint16
	PathBits    uint8   // From's offset from its port's base LID
	Source      PortRef // the end port From belongs to
	Destination PortRef // the end port To belongs to
	Hops        []Hop
}

// Walk follows the forwarding tables from the end port that owns from
// (a CA's or router's port, path bits included, or a switch's port 0) to
// the end port that owns to. It fails when a LID is no port's, a switch on
// the way has no table or no entry for to, a port leads nowhere, the route
// reaches another port than to's, loops, or passes MaxHops.
func Walk(t *Topology, lfts LFTs, from, to uint16) (Route, error) {
	src, srcPort, ok := t.owner(from)
	if !ok {
		return Route{}, fmt.Errorf("source lid %d is no port's in the topology", from)
	}
	dst, _, ok := t.owner(to)
	if !ok {
		return Route{}, fmt.Errorf("destination lid %d is no port's in the topology", to)
	}
	r := Route{From: from, To: to, PathBits: uint8(from - srcPort.LID),
		Source: t.ref(src), Destination: t.ref(dst)}
	if src == dst {
		return r, nil
	}
	at, in := src.GUID, 0
	if t.Nodes[src.GUID].Type != Switch {
		next, ok := t.Nodes[src.GUID].Links[src.Port]
		if !ok {
			return Route{}, fmt.Errorf("source %s port %d is not linked in the topology", t.name(src.GUID), src.Port)
		}
		at, in = next.GUID, next.Port
	}
	seen := map[GUID]bool{}
	for {
		n := t.Nodes[at]
		if n == nil {
			return Route{}, fmt.Errorf("route to lid %d enters %s, which the topology does not list", to, at)
		}
		if n.Type != Switch {
			// Delivered to an end port: to's, or a wrong one.
			if (End{GUID: at, Port: in}) != dst {
				return Route{}, fmt.Errorf("route to lid %d ends at %s port %d, not at the port of lid %d", to, t.name(at), in, to)
			}
			return r, nil
		}
		if seen[at] {
			return Route{}, fmt.Errorf("route to lid %d loops: it enters %s again", to, t.name(at))
		}
		seen[at] = true
		if len(r.Hops) == MaxHops {
			return Route{}, fmt.Errorf("route to lid %d crosses more than %d switches", to, MaxHops)
		}
		lft := lfts[at]
		if lft == nil {
			return Route{}, fmt.Errorf("switch %s has no forwarding table in the lft dump", t.name(at))
		}
		out, ok := lft.OutPort(to)
		if !ok {
			return Route{}, fmt.Errorf("switch %s has no forwarding entry for lid %d", t.name(at), to)
		}
		r.Hops = append(r.Hops, Hop{GUID: at, Name: n.Name, InPort: in, OutPort: out})
		if out == 0 {
			if (End{GUID: at}) != dst {
				return Route{}, fmt.Errorf("switch %s takes lid %d for its own (port 0), not the port of lid %d", t.name(at), to, to)
			}
			return r, nil
		}
		next, ok := n.Links[out]
		if !ok {
			return Route{}, fmt.Errorf("switch %s sends lid %d out of port %d, which is not linked in the topology", t.name(at), to, out)
		}
		at, in = next.GUID, next.Port
	}
}

func (t *Topology) ref(e End) PortRef {
	return PortRef{GUID: e.GUID, Name: t.Nodes[e.GUID].Name, Port: e.Port}
}

// name is a node for an error: its description (escaped, quoted) and GUID.
func (t *Topology) name(g GUID) string {
	if n := t.Nodes[g]; n != nil && n.Name != "" {
		return fmt.Sprintf("%q (%s)", clip(n.Name), g)
	}
	return g.String()
}

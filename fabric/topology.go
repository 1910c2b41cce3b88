package fabric

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// NodeType is what a node is: a switch, a channel adapter or a router.
type NodeType string

// The node types ibnetdiscover prints.
const (
	Switch NodeType = "switch"
	CA     NodeType = "ca"
	Router NodeType = "router"
)

// GUID is a node or port GUID.
type GUID uint64

// String is the GUID as ibnetdiscover and ibroute print it: 0x and 16 hex digits.
func (g GUID) String() string { return fmt.Sprintf("0x%016x", uint64(g)) }

// Node is a switch, channel adapter or router of the topology.
type Node struct {
	Type  NodeType
	GUID  GUID   // the node GUID
	Name  string // the NodeDescription, as read (escape it to print)
	Ports int    // the number of ports the node has
	// LID and LMC of a switch's port 0 (0 when not printed).
	LID uint16
	LMC uint8
	// Links by local port number.
	Links map[int]End
	// EndPorts are a CA's or router's ports with their LIDs, by port number.
	EndPorts map[int]EndPort
}

// End is one side of a link: a node and its port.
type End struct {
	GUID GUID
	Port int
}

// EndPort is a CA's or router's port: its LID range is LID .. LID+2^LMC-1.
type EndPort struct {
	LID uint16
	LMC uint8
}

// Topology is a fabric as ibnetdiscover printed it.
type Topology struct {
	Nodes map[GUID]*Node
	lids  map[uint16]End // every end port's LIDs
}

// ParseTopology reads ibnetdiscover's output. It reads the node headers
// (Switch, Ca, Rt), their port lines and the LIDs and LMCs in their
// comments; other lines (vendid=, switchguid=, chassis lines, comments)
// are skipped. The links both sides print must agree.
func ParseTopology(r io.Reader, lim Limits) (*Topology, error) {
	t := &Topology{Nodes: map[GUID]*Node{}}
	lr := newLineReader(r, lim)
	var cur *Node
	for {
		b, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("topology: %w", err)
		}
		line := strings.TrimSpace(string(b))
		switch {
		case line == "" || line[0] == '#':
			continue
		case line[0] == '[':
			if cur == nil {
				return nil, fmt.Errorf("topology: %w", lr.errorf("port line before any node"))
			}
			if err := cur.parsePort(line, lim); err != nil {
				return nil, fmt.Errorf("topology: %w", lr.errorf("%v", err))
			}
		default:
			n, ok, err := parseNodeHeader(line, lim)
			if err != nil {
				return nil, fmt.Errorf("topology: %w", lr.errorf("%v", err))
			}
			if !ok {
				continue // vendid=, devid=, chassis lines, ...
			}
			if t.Nodes[n.GUID] != nil {
				return nil, fmt.Errorf("topology: %w", lr.errorf("node %s listed twice", n.GUID))
			}
			if len(t.Nodes) >= lim.MaxNodes {
				return nil, fmt.Errorf("topology: %w", lr.errorf("more than %d nodes", lim.MaxNodes))
			}
			t.Nodes[n.GUID] = n
			cur = n
		}
	}
	if len(t.Nodes) == 0 {
		return nil, errors.New("topology: no node (not ibnetdiscover output?)")
	}
	if err := t.checkLinks(); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	if err := t.indexLIDs(); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return t, nil
}

// parseNodeHeader reads `Switch 8 "S-0000000000200005"  # "Leaf4" base
// port 0 lid 14 lmc 0` or `Ca 1 "H-000000000010000e"  # "H8"`; ok is false
// for a line that is no node header.
func parseNodeHeader(line string, lim Limits) (*Node, bool, error) {
	word, rest, _ := strings.Cut(line, " ")
	if w, r, ok := strings.Cut(line, "\t"); ok && len(w) < len(word) {
		word, rest = w, r
	}
	var typ NodeType
	switch word {
	case "Switch":
		typ = Switch
	case "Ca":
		typ = CA
	case "Rt":
		typ = Router
	default:
		return nil, false, nil
	}
	rest = strings.TrimSpace(rest)
	num, rest, _ := strings.Cut(rest, "\"")
	ports, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || ports < 1 || ports > lim.MaxPorts {
		return nil, true, fmt.Errorf("%s header: bad port count %q", typ, strings.TrimSpace(num))
	}
	id, rest, ok := strings.Cut(rest, "\"")
	if !ok {
		return nil, true, fmt.Errorf("%s header: unterminated node id", typ)
	}
	guid, err := parseNodeID(id)
	if err != nil {
		return nil, true, fmt.Errorf("%s header: %w", typ, err)
	}
	n := &Node{Type: typ, GUID: guid, Ports: ports, Links: map[int]End{}, EndPorts: map[int]EndPort{}}
	_, comment, _ := strings.Cut(rest, "#")
	if i, j := strings.Index(comment, "\""), strings.LastIndex(comment, "\""); i >= 0 && j > i {
		n.Name = comment[i+1 : j]
		comment = comment[j+1:]
	}
	if typ == Switch {
		if lid, lmc, ok, err := lidLMC(comment, "port 0 lid "); err != nil {
			return nil, true, fmt.Errorf("switch header: %w", err)
		} else if ok {
			n.LID, n.LMC = lid, lmc
		}
	}
	return n, true, nil
}

// parseNodeID reads "S-0000000000200005" (H- and R- too).
func parseNodeID(id string) (GUID, error) {
	if len(id) < 3 || id[1] != '-' || !strings.ContainsRune("SHR", rune(id[0])) {
		return 0, fmt.Errorf("bad node id %q", clip(id))
	}
	g, err := strconv.ParseUint(id[2:], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("bad node id %q", clip(id))
	}
	return GUID(g), nil
}

// lidLMC reads "lid N lmc M" after key in s (key itself ends in "lid ").
func lidLMC(s, key string) (lid uint16, lmc uint8, ok bool, err error) {
	i := strings.Index(s, key)
	if i < 0 {
		return 0, 0, false, nil
	}
	f := strings.Fields(s[i+len(key):])
	if len(f) < 3 || f[1] != "lmc" {
		return 0, 0, false, fmt.Errorf("bad lid/lmc in %q", clip(s))
	}
	l, err1 := strconv.ParseUint(f[0], 10, 16)
	m, err2 := strconv.ParseUint(f[2], 10, 8)
	if err1 != nil || err2 != nil || l > MaxUnicastLID || m > 7 {
		return 0, 0, false, fmt.Errorf("bad lid/lmc in %q", clip(s))
	}
	return uint16(l), uint8(m), true, nil
}

// parsePort reads a port line: `[1]  "H-000000000010000c"[1](10000d)  # ...`
// on a switch, `[1](10000f)  "S-0000000000200005"[2]  # lid 24 lmc 1 ...`
// on a CA. An `[ext N]` after a port number (grouped output) is skipped.
func (n *Node) parsePort(line string, lim Limits) error {
	port, rest, err := portNumber(line, n.Ports)
	if err != nil {
		return err
	}
	rest = skipParen(skipExt(rest))
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "\"") {
		return fmt.Errorf("port %d: no peer", port)
	}
	id, rest, ok := strings.Cut(rest[1:], "\"")
	if !ok {
		return fmt.Errorf("port %d: unterminated peer id", port)
	}
	peer, err := parseNodeID(id)
	if err != nil {
		return fmt.Errorf("port %d: %w", port, err)
	}
	peerPort, rest, err := portNumber(rest, lim.MaxPorts)
	if err != nil {
		return fmt.Errorf("port %d: peer %w", port, err)
	}
	if _, dup := n.Links[port]; dup {
		return fmt.Errorf("port %d listed twice", port)
	}
	n.Links[port] = End{GUID: peer, Port: peerPort}
	if n.Type != Switch {
		_, comment, _ := strings.Cut(rest, "#")
		comment = strings.TrimSpace(comment)
		if strings.HasPrefix(comment, "lid ") {
			lid, lmc, ok, err := lidLMC(comment, "lid ")
			if err != nil {
				return fmt.Errorf("port %d: %w", port, err)
			}
			if ok {
				n.EndPorts[port] = EndPort{LID: lid, LMC: lmc}
			}
		}
	}
	return nil
}

// portNumber reads "[N]" at the start of s: 1..max.
func portNumber(s string, max int) (int, string, error) {
	if !strings.HasPrefix(s, "[") {
		return 0, s, fmt.Errorf("no port number in %q", clip(s))
	}
	num, rest, ok := strings.Cut(s[1:], "]")
	p, err := strconv.Atoi(num)
	if !ok || err != nil || p < 1 || p > max {
		return 0, s, fmt.Errorf("bad port number %q", clip(num))
	}
	return p, rest, nil
}

// skipExt skips "[ext N]" at the start of s.
func skipExt(s string) string {
	if strings.HasPrefix(s, "[ext ") {
		if _, rest, ok := strings.Cut(s, "]"); ok {
			return rest
		}
	}
	return s
}

// skipParen skips a port GUID "(10000f)" at the start of s.
func skipParen(s string) string {
	if strings.HasPrefix(s, "(") {
		if _, rest, ok := strings.Cut(s, ")"); ok {
			return rest
		}
	}
	return s
}

// checkLinks wants both sides of a link, where both are listed, to name
// each other.
func (t *Topology) checkLinks() error {
	for _, n := range t.Nodes {
		for port, e := range n.Links {
			peer := t.Nodes[e.GUID]
			if peer == nil {
				continue // a node the output did not list: its side is unknown
			}
			back, ok := peer.Links[e.Port]
			if ok && (back.GUID != n.GUID || back.Port != port) {
				return fmt.Errorf("%s port %d links to %s port %d, which links to %s port %d",
					n.GUID, port, e.GUID, e.Port, back.GUID, back.Port)
			}
			if e.Port > peer.Ports {
				return fmt.Errorf("%s port %d links to port %d of %s, which has %d ports",
					n.GUID, port, e.Port, e.GUID, peer.Ports)
			}
		}
	}
	return nil
}

// clip shortens what an error quotes from the file.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// indexLIDs maps every LID of an end port (a CA's or router's port, a
// switch's port 0) to it; two ports may not share a LID.
func (t *Topology) indexLIDs() error {
	t.lids = map[uint16]End{}
	add := func(e End, p EndPort) error {
		if p.LID == 0 {
			return nil
		}
		for i := range 1 << p.LMC {
			lid := int(p.LID) + i
			if lid > MaxUnicastLID {
				return fmt.Errorf("%s port %d: lid %d lmc %d past the unicast range", e.GUID, e.Port, p.LID, p.LMC)
			}
			if o, dup := t.lids[uint16(lid)]; dup {
				return fmt.Errorf("lid %d is both %s port %d's and %s port %d's", lid, o.GUID, o.Port, e.GUID, e.Port)
			}
			t.lids[uint16(lid)] = e
		}
		return nil
	}
	for _, n := range t.Nodes {
		if n.Type == Switch {
			if err := add(End{GUID: n.GUID}, EndPort{LID: n.LID, LMC: n.LMC}); err != nil {
				return err
			}
			continue
		}
		for port, p := range n.EndPorts {
			if err := add(End{GUID: n.GUID, Port: port}, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// owner finds the end port (a CA's or router's port, or a switch's port
// 0) whose LIDs include lid, and that port's LIDs.
func (t *Topology) owner(lid uint16) (End, EndPort, bool) {
	e, ok := t.lids[lid]
	if !ok {
		return End{}, EndPort{}, false
	}
	n := t.Nodes[e.GUID]
	if n.Type == Switch {
		return e, EndPort{LID: n.LID, LMC: n.LMC}, true
	}
	return e, n.EndPorts[e.Port], true
}

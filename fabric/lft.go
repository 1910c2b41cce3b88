package fabric

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// noRoute marks a LID a table has no entry for (255 is also what a
// switch's table holds for a LID it drops).
const noRoute = 0xff

// LFT is one switch's unicast linear forwarding table.
type LFT struct {
	GUID GUID
	Name string // as the dump printed it (escape it to print)
	out  []byte // out port by LID; noRoute where none
}

// OutPort is the port the switch forwards lid to; ok is false when the
// table has no entry for it.
func (l *LFT) OutPort(lid uint16) (port int, ok bool) {
	if int(lid) >= len(l.out) || l.out[lid] == noRoute {
		return 0, false
	}
	return int(l.out[lid]), true
}

// LFTs are the forwarding tables of a fabric's switches, by switch GUID.
type LFTs map[GUID]*LFT

// ParseLFTs reads the unicast forwarding tables dump_lfts (dump_fts) and
// ibroute print, and OpenSM's opensm-lfts.dump: a header per switch
//
//	Unicast lids [0x0-0x19] of switch Lid 6 guid 0x0000000000200002 (Leaf1):
//
// then a line per LID, "0x0016 007 ..." (LID in hex, out port in
// decimal). Multicast sections, column titles, counts and warnings are
// skipped.
func ParseLFTs(r io.Reader, lim Limits) (LFTs, error) {
	t := LFTs{}
	lr := newLineReader(r, lim)
	var cur *LFT
	multicast := false
	size := 0 // the tables' entries, the LIDs without one included
	for {
		b, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("lfts: %w", err)
		}
		line := strings.TrimSpace(string(b))
		switch {
		case strings.HasPrefix(line, "Unicast lids"):
			l, err := parseLFTHeader(line)
			if err != nil {
				return nil, fmt.Errorf("lfts: %w", lr.errorf("%v", err))
			}
			if t[l.GUID] != nil {
				return nil, fmt.Errorf("lfts: %w", lr.errorf("switch %s dumped twice", l.GUID))
			}
			if len(t) >= lim.MaxNodes {
				return nil, fmt.Errorf("lfts: %w", lr.errorf("more than %d switches", lim.MaxNodes))
			}
			t[l.GUID] = l
			cur = l
			multicast = false
		case strings.HasPrefix(line, "Multicast mlids"):
			cur, multicast = nil, true // its entries are skipped up to the next unicast header
		case strings.HasPrefix(line, "0x") && !multicast:
			if cur == nil {
				return nil, fmt.Errorf("lfts: %w", lr.errorf("forwarding entry before any unicast switch header"))
			}
			if err := cur.parseEntry(line, lim, &size); err != nil {
				return nil, fmt.Errorf("lfts: %w", lr.errorf("switch %s: %v", cur.GUID, err))
			}
		}
	}
	if len(t) == 0 {
		return nil, errors.New("lfts: no unicast switch table (not dump_lfts, ibroute or opensm-lfts.dump output?)")
	}
	return t, nil
}

// parseLFTHeader reads the switch's GUID and name from a unicast header.
func parseLFTHeader(line string) (*LFT, error) {
	_, rest, ok := strings.Cut(line, " guid 0x")
	if !ok {
		return nil, fmt.Errorf("unicast header without a switch guid")
	}
	hex, rest, _ := strings.Cut(rest, " ")
	hex = strings.TrimSuffix(hex, ":")
	g, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return nil, fmt.Errorf("bad switch guid %q", clip(hex))
	}
	name := strings.TrimSpace(rest)
	name = strings.TrimSuffix(name, ":")
	if strings.HasPrefix(name, "(") && strings.HasSuffix(name, ")") {
		name = name[1 : len(name)-1]
	}
	if len(name) >= 2 && name[0] == '\'' && name[len(name)-1] == '\'' {
		name = name[1 : len(name)-1]
	}
	return &LFT{GUID: GUID(g), Name: name}, nil
}

// parseEntry reads "0x0016 007 : (Channel Adapter ...)" (ibroute) or
// "0x0016 007 # ..." (OpenSM).
// The tables together hold at most lim.MaxEntries LIDs (*size).
func (l *LFT) parseEntry(line string, lim Limits, size *int) error {
	f := strings.Fields(line)
	if len(f) < 2 {
		return fmt.Errorf("entry without an out port: %q", clip(line))
	}
	lid, err := strconv.ParseUint(f[0][2:], 16, 32)
	if err != nil || lid == 0 || lid > MaxUnicastLID {
		return fmt.Errorf("bad unicast lid %q", clip(f[0]))
	}
	port, err := strconv.ParseUint(f[1], 10, 16)
	if err != nil || (port > uint64(lim.MaxPorts) && port != noRoute) {
		return fmt.Errorf("lid %#04x: bad out port %q", lid, clip(f[1]))
	}
	if int(lid) >= len(l.out) {
		n := max(int(lid)+1, min(2*len(l.out), MaxUnicastLID+1))
		if *size+n-len(l.out) > lim.MaxEntries {
			return fmt.Errorf("forwarding tables past %d entries", lim.MaxEntries)
		}
		*size += n - len(l.out)
		grown := make([]byte, n)
		copy(grown, l.out)
		for i := len(l.out); i < n; i++ {
			grown[i] = noRoute
		}
		l.out = grown
	}
	if old := l.out[lid]; old != noRoute && old != byte(port) {
		return fmt.Errorf("lid %#04x listed twice, to port %d and %d", lid, old, port)
	}
	l.out[lid] = byte(port)
	return nil
}

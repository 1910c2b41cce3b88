package fabric

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/apmwatch/apmwatch/internal/columns"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// Query is what `apmwatch routes` asks: the files and the LIDs.
type Query struct {
	Topology, LFTs string // the ibnetdiscover output, the LFT dump
	From, To       uint16 // the route's source LID (path bits included) and destination LID
	Alt            uint16 // the second route's destination LID (0: none)
	AltFrom        uint16 // the second route's source LID (0: From)
	JSON           bool
	Wide           bool // the table in full, past 80 columns
}

// Validate checks the LIDs, before any file is read.
func (q Query) Validate() error {
	for _, l := range []struct {
		name     string
		v        uint16
		optional bool
	}{{"--from", q.From, false}, {"--to", q.To, false}, {"--alt", q.Alt, true}, {"--alt-from", q.AltFrom, true}} {
		if l.v == 0 && !l.optional {
			return fmt.Errorf("%s is required: a unicast lid, 1-%d", l.name, MaxUnicastLID)
		}
		if l.v > MaxUnicastLID {
			return fmt.Errorf("bad %s %d: a unicast lid is 1-%d", l.name, l.v, MaxUnicastLID)
		}
	}
	if q.AltFrom != 0 && q.Alt == 0 {
		return fmt.Errorf("--alt-from needs --alt")
	}
	if q.Topology == "" || q.LFTs == "" {
		return fmt.Errorf("--topology and --lfts are required")
	}
	return nil
}

// Run reads the files, walks the route (and the second one) and writes
// the table or the JSON document to w.
func Run(q Query, lim Limits, w io.Writer) error {
	t, err := readFile(q.Topology, func(r io.Reader) (*Topology, error) { return ParseTopology(r, lim) })
	if err != nil {
		return err
	}
	lfts, err := readFile(q.LFTs, func(r io.Reader) (LFTs, error) { return ParseLFTs(r, lim) })
	if err != nil {
		return err
	}
	rep, err := Routes(t, lfts, q)
	if err != nil {
		return err
	}
	if q.JSON {
		return rep.WriteJSON(w)
	}
	width := columns.Terminal
	if q.Wide {
		width = 0
	}
	return rep.WriteTable(w, width)
}

func readFile[T any](path string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Report is a route, and with a second one what both share.
type Report struct {
	Route  Route
	Alt    *Route
	Shared []Element
	Ends   Ends
}

// Routes walks q's route and, with q.Alt, the second route and what both share.
func Routes(t *Topology, lfts LFTs, q Query) (Report, error) {
	r, err := Walk(t, lfts, q.From, q.To)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Route: r}
	if q.Alt == 0 {
		return rep, nil
	}
	from := q.AltFrom
	if from == 0 {
		from = q.From
	}
	alt, err := Walk(t, lfts, from, q.Alt)
	if err != nil {
		return Report{}, fmt.Errorf("alternate: %w", err)
	}
	rep.Alt = &alt
	rep.Shared, rep.Ends = Shared(r, alt)
	return rep, nil
}

// The JSON document (docs/routes.md): names escaped (internal/escape).
type (
	jsonPort struct {
		GUID string `json:"guid"`
		Name string `json:"name"`
		Port int    `json:"port"`
	}
	jsonHop struct {
		GUID    string `json:"guid"`
		Name    string `json:"name"`
		InPort  int    `json:"in_port"`
		OutPort int    `json:"out_port"`
	}
	jsonRoute struct {
		From        uint16    `json:"from"`
		To          uint16    `json:"to"`
		PathBits    uint8     `json:"path_bits"`
		Source      jsonPort  `json:"source"`
		Destination jsonPort  `json:"destination"`
		Hops        []jsonHop `json:"hops"`
	}
	jsonElement struct {
		Kind string    `json:"kind"` // "switch" or "link"
		GUID string    `json:"guid,omitempty"`
		Name string    `json:"name,omitempty"`
		From *jsonPort `json:"from,omitempty"`
		To   *jsonPort `json:"to,omitempty"`
	}
	jsonEnd struct {
		Route jsonPort `json:"route"`
		Alt   jsonPort `json:"alt"`
		Same  bool     `json:"same"`
	}
	jsonEnds struct {
		Source      jsonEnd `json:"source"`
		Destination jsonEnd `json:"destination"`
	}
	jsonReport struct {
		Route  jsonRoute      `json:"route"`
		Alt    *jsonRoute     `json:"alt,omitempty"`
		Shared *[]jsonElement `json:"shared,omitempty"` // [] with a second route that shares nothing
		Ends   *jsonEnds      `json:"ends,omitempty"`
	}
)

func port(p PortRef) jsonPort {
	return jsonPort{GUID: p.GUID.String(), Name: escape.Text(p.Name), Port: p.Port}
}

func route(r Route) jsonRoute {
	j := jsonRoute{From: r.From, To: r.To, PathBits: r.PathBits, Source: port(r.Source), Destination: port(r.Destination), Hops: []jsonHop{}}
	for _, h := range r.Hops {
		j.Hops = append(j.Hops, jsonHop{GUID: h.GUID.String(), Name: escape.Text(h.Name), InPort: h.InPort, OutPort: h.OutPort})
	}
	return j
}

func end(p [2]PortRef) jsonEnd {
	return jsonEnd{Route: port(p[0]), Alt: port(p[1]), Same: p[0].GUID == p[1].GUID && p[0].Port == p[1].Port}
}

// WriteJSON writes the report as one JSON document.
func (rep Report) WriteJSON(w io.Writer) error {
	j := jsonReport{Route: route(rep.Route)}
	if rep.Alt != nil {
		a := route(*rep.Alt)
		j.Alt = &a
		shared := []jsonElement{}
		for _, e := range rep.Shared {
			if e.Switch != nil {
				shared = append(shared, jsonElement{Kind: "switch", GUID: e.Switch.GUID.String(), Name: escape.Text(e.Switch.Name)})
				continue
			}
			from, to := port(e.Link[0]), port(e.Link[1])
			shared = append(shared, jsonElement{Kind: "link", From: &from, To: &to})
		}
		j.Shared = &shared
		j.Ends = &jsonEnds{Source: end(rep.Ends.Source), Destination: end(rep.Ends.Destination)}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(j)
}

// WriteTable writes the report for a terminal: lines of at most width
// columns, long names cut (0: in full).
func (rep Report) WriteTable(w io.Writer, width int) error {
	var lines []string
	lines = append(lines, routeLines("route", rep.Route, width)...)
	if rep.Alt != nil {
		lines = append(lines, "")
		lines = append(lines, routeLines("alternate", *rep.Alt, width)...)
		lines = append(lines, "")
		lines = append(lines, sharedLines(rep.Shared, rep.Ends, width)...)
	}
	for _, l := range lines {
		if width > 0 {
			l = columns.Clip(l, width)
		}
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// portText is a port for the table: its node's name (cut to 24 columns
// when the table has a width) or GUID, and its number.
func portText(p PortRef, width int) string {
	name := escape.Text(p.Name)
	if name == "" {
		name = p.GUID.String()
	}
	if width > 0 {
		name = columns.Clip(name, 24)
	}
	return name + " port " + strconv.Itoa(p.Port)
}

func routeLines(title string, r Route, width int) []string {
	head := fmt.Sprintf("%s lid %d -> lid %d (path bits %d): %s -> %s, %d switches",
		title, r.From, r.To, r.PathBits, portText(r.Source, width), portText(r.Destination, width), len(r.Hops))
	if len(r.Hops) == 0 {
		return []string{head}
	}
	t := columns.Table{Rows: [][]string{{"HOP", "SWITCH", "GUID", "IN", "OUT"}}, Cut: []columns.Cut{{Col: 1, Min: 8}}}
	for i, h := range r.Hops {
		t.Rows = append(t.Rows, []string{strconv.Itoa(i + 1), escape.Text(h.Name), h.GUID.String(), strconv.Itoa(h.InPort), strconv.Itoa(h.OutPort)})
	}
	if width > 0 {
		t.Fit(width, 2)
	}
	lines := []string{head}
	for _, l := range t.Lines() {
		lines = append(lines, "  "+l)
	}
	return lines
}

func sharedLines(shared []Element, ends Ends, width int) []string {
	var lines []string
	if len(shared) == 0 {
		lines = append(lines, "shared: no switch, no link")
	} else {
		t := columns.Table{Rows: [][]string{{"SHARED", "ELEMENT"}}, Cut: []columns.Cut{{Col: 1, Min: 16}}}
		for _, e := range shared {
			if e.Switch != nil {
				t.Rows = append(t.Rows, []string{"switch", escape.Text(e.Switch.Name) + " " + e.Switch.GUID.String()})
				continue
			}
			t.Rows = append(t.Rows, []string{"link", portText(e.Link[0], width) + " -> " + portText(e.Link[1], width)})
		}
		if width > 0 {
			t.Fit(width, 0)
		}
		lines = append(lines, t.Lines()...)
	}
	for _, e := range []struct {
		name string
		p    [2]PortRef
	}{{"source", ends.Source}, {"destination", ends.Destination}} {
		if e.p[0] == e.p[1] {
			lines = append(lines, fmt.Sprintf("end: %s %s, the same port for both", e.name, portText(e.p[0], width)))
		} else {
			lines = append(lines, fmt.Sprintf("end: %s %s, alternate's %s", e.name, portText(e.p[0], width), portText(e.p[1], width)))
		}
	}
	return lines
}

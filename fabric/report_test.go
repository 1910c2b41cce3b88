package fabric

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/columns"
)

// A node description is the fabric's text: escaped in the table and the
// JSON, cut in the table, whole in wide.
func TestReportEscapesAndFits(t *testing.T) {
	long := "\x1b[2J" + strings.Repeat("spine-with-a-long-description-", 4)
	topo, err := ParseTopology(strings.NewReader(strings.Replace(fixture(t, "ibnetdiscover.out"), `# "Spine1" base port 0`, `# "`+long+`" base port 0`, 1)), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	_, lfts := fattree(t)
	rep, err := Routes(topo, lfts, Query{From: 2, To: 22, Alt: 25})
	if err != nil {
		t.Fatal(err)
	}
	var table, wide, js bytes.Buffer
	if err := rep.WriteTable(&table, columns.Terminal); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTable(&wide, 0); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "wide": wide.String(), "json": js.String()} {
		if strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[2J`) && !strings.Contains(out, `\\x1b[2J`) {
			t.Errorf("%s: the escape is not escaped:\n%s", name, out)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(table.String()), "\n") {
		if columns.Width(l) > columns.Terminal {
			t.Errorf("a line of %d columns: %q", columns.Width(l), l)
		}
	}
	if !strings.Contains(wide.String(), strings.Repeat("spine-with-a-long-description-", 4)) {
		t.Errorf("wide cut the name:\n%s", wide.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
}

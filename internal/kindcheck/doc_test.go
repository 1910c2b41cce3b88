package kindcheck

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// eventsDoc is what docs/events.md documents.
type eventsDoc struct {
	fields   map[string]bool // every name in the first column of a table
	sections map[string]bool // kinds named in a "## " heading, before its colon
	kindRow  map[string]bool // the names the common field `kind` lists
}

var backticked = regexp.MustCompile("`([^`]+)`")

func readEventsDoc(t *testing.T) eventsDoc {
	t.Helper()
	b, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	d := eventsDoc{fields: map[string]bool{}, sections: map[string]bool{}, kindRow: map[string]bool{}}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			head, _, _ := strings.Cut(line, ":")
			for _, m := range backticked.FindAllStringSubmatch(head, -1) {
				d.sections[m[1]] = true
			}
		case strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, "|")
			for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
				d.fields[m[1]] = true
			}
			if strings.TrimSpace(cells[1]) == "`kind`" && len(cells) > 3 {
				for _, m := range backticked.FindAllStringSubmatch(cells[3], -1) {
					d.kindRow[m[1]] = true
				}
			}
		}
	}
	if len(d.fields) < 20 || len(d.sections) < 5 || len(d.kindRow) < 5 {
		t.Fatalf("docs/events.md: %d fields, %d kind sections, %d kinds in the kind row: the layout changed", len(d.fields), len(d.sections), len(d.kindRow))
	}
	return d
}

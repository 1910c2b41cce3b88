package postmortem

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The recordings in examples/ (made in the lab by earlier versions, too)
// still replay, and each gives exactly the findings docs/postmortem.md
// documents for it.
func TestExamplesGiveTheirDocumentedFindings(t *testing.T) {
	doc, err := os.ReadFile("../docs/postmortem.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		files []string
		want  map[string]int // kind -> count
	}{
		{[]string{"correct-rearm.rec"}, map[string]int{"rearm-without-new-alternate": 2}},
		// the pairs pair by the port addresses their headers carry (older recordings without them: TestOlderRecordingsUnpaired)
		{[]string{"missed-rearm.rec"}, map[string]int{"missed-rearm": 1}},
		{[]string{"rearm-then-alt.rec"}, map[string]int{"rearm-without-new-alternate": 1, "apm-modify-failed": 1, "one-sided-rearm": 1}},
		{[]string{"mig-state-mismatch.rec"}, map[string]int{"mig-state-mismatch": 1, "missed-rearm": 1}},
		{[]string{"pair-rxe0.rec", "pair-rxe1.rec"}, map[string]int{"rearm-without-new-alternate": 1, "one-sided-rearm": 1}},
		// InfiniBand (the lab's simulated HCA): both ends migrate on a port failure
		{[]string{"ib-correct.rec"}, map[string]int{}},
		{[]string{"ib-unprotected-failure.rec"}, map[string]int{"missed-rearm": 2, "unprotected-failure": 2}},
		{[]string{"ib-lap-race.rec"}, map[string]int{"lap-race": 2}},
		{[]string{"ib-pair-ibsim0.rec", "ib-pair-ibsim1.rec"}, map[string]int{"missed-rearm": 1, "one-sided-rearm": 1}},
		// Debian's Open MPI: as shipped its alternate load never reaches the verbs layer; corrected, nobody rearms
		{[]string{"openmpi-port-failure.rec"}, map[string]int{"apm-modify-failed": 16}},
		{[]string{"openmpi-altport-fixed.rec"}, map[string]int{"missed-rearm": 4, "stuck-rearm": 4}},
		{[]string{"openmpi-lmc.rec"}, map[string]int{"apm-modify-failed": 16, "missed-rearm": 4, "stuck-rearm": 4}},
	} {
		name := strings.Join(tc.files, "+")
		t.Run(name, func(t *testing.T) {
			var paths []string
			for _, f := range tc.files {
				paths = append(paths, filepath.Join("..", "examples", f))
			}
			r := run(t, Options{}, paths...)
			got := map[string]int{}
			for _, f := range r.Findings {
				if !f.Resolved {
					got[string(f.Kind)]++
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v", got, tc.want)
			}
			row := docRow(string(doc), tc.files[0])
			for _, k := range slices.Sorted(maps.Keys(tc.want)) {
				if !strings.Contains(row, "`"+k+"`") {
					t.Errorf("docs/postmortem.md's row for %s does not name %s: %q", tc.files[0], k, row)
				}
			}
		})
	}
}

// docRow is the line of the examples table that names file.
func docRow(doc, file string) string {
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "| `"+file+"`") {
			return l
		}
	}
	return ""
}

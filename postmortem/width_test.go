package postmortem

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/columns"
)

// timelineLine is a row of a timeline table: its header or an entry.
var timelineLine = regexp.MustCompile(`^  (TIME |\d\d:\d\d:\d\d\.\d{6} )`)

// The timelines fit 80 columns on realistic recordings: hosts with fully
// qualified names (two sides of one connection, paired), a QP whose
// alternate loads have global routes; the QP names and details are cut
// with an ellipsis. -o wide has them whole.
func TestTimelineWidth(t *testing.T) {
	a, b := newHost(0), newHost(0)
	connect(a, 100, 200, 0x11)
	connect(b, 200, 100, 0x21)
	a.After(time.Second).PathMig(100)
	b.After(time.Millisecond).PathMig(200)
	gid := [16]byte{0xfe, 0x80, 15: 1}
	a.LoadAlt(100, event.Path{Port: 2, DLID: 0x13, IsGlobal: true, DGID: gid, SGIDIndex: 3, PKeyIndex: 1, Timeout: 18})
	a.Rearm(100)
	b.LoadAlt(200, event.Path{Port: 2, DLID: 0x23, IsGlobal: true, DGID: gid, SGIDIndex: 3, PKeyIndex: 1, Timeout: 18})
	b.Rearm(200)
	ownLIDs(a.After(time.Millisecond), 0x21, 0x22)
	ownLIDs(b.After(time.Millisecond), 0x11, 0x12)
	connect(a, 300, 999, 0x99) // a QP of a's own, unpaired
	a.LoadAlt(300, event.Path{Port: 2, DLID: 0x98, IsGlobal: true, DGID: gid, SGIDIndex: 3, PKeyIndex: 1, Timeout: 18})
	dir := t.TempDir()
	pa := write(t, dir, "a.rec", "compute-node-0417.rack12.cluster.example.com", a, uint64(5*time.Second))
	pb := write(t, dir, "b.rec", "compute-node-0418.rack12.cluster.example.com", b, uint64(5*time.Second))
	r := run(t, Options{All: true}, pa, pb)
	if len(r.Pairs) != 1 {
		t.Fatalf("%d pairs", len(r.Pairs))
	}
	rows := func(wide bool) (n, over int, out string) {
		var buf bytes.Buffer
		write := WriteText
		if wide {
			write = WriteTextWide
		}
		if err := write(&buf, r); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(buf.String(), "\n") {
			if timelineLine.MatchString(l) {
				n++
				if columns.Width(l) > columns.Terminal {
					over++
				}
			}
		}
		return n, over, buf.String()
	}
	n, over, out := rows(false)
	if n < 19 || over > 0 || !strings.Contains(out, columns.Ellipsis) || !strings.Contains(out, "  a: compute-node-0417.rack12.…  b: compute-node-0418") {
		t.Errorf("%d timeline rows, %d over 80 columns:\n%s", n, over, out)
	}
	n2, over, out := rows(true)
	if n2 != n || over == 0 || !strings.Contains(out, "b: compute-node-0418.rack12.cluster.example.com/") {
		t.Errorf("wide: %d timeline rows, %d over 80 columns:\n%s", n2, over, out)
	}
}

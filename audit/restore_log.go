package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/internal/trusted"
)

// What a restart reads of its finding log is bounded like any file: the
// last maxLogRead bytes of the log and of its last rotation (logrotate's
// ".1"), lines up to maxLogLine, at most maxLogOpen open findings.
const (
	maxLogRead = 64 << 20
	maxLogLine = 1 << 20
	maxLogOpen = 1 << 20
)

// logged is what the finding log says: every finding by its key, the
// open ones, the resolved ones and the highest ID written.
type logged struct {
	byKey    map[findingKey]uint64
	open     map[uint64]apm.Finding
	resolved map[uint64]bool
	boot     map[uint64]string // an open finding's boot_id ("": an older line)
	maxID    uint64
}

// logLine is what a restart reads of a line (the severity is a string).
type logLine struct {
	Type     string    `json:"type"`
	ID       uint64    `json:"id"`
	Kind     apm.Kind  `json:"kind"`
	Severity string    `json:"severity"`
	QP       apm.Key   `json:"qp"`
	PID      uint32    `json:"pid"`
	Comm     string    `json:"comm"`
	First    uint64    `json:"first_boot_ns"`
	Last     uint64    `json:"last_boot_ns"`
	FirstAt  time.Time `json:"first_time"`
	Resolved bool      `json:"resolved"`
	Resolves uint64    `json:"resolves"`
	BootID   string    `json:"boot_id"`
}

// readLogged reads the finding log at path ("" or missing: nothing).
func readLogged(path string, warn func(string, ...any)) logged {
	l := logged{byKey: map[findingKey]uint64{}, open: map[uint64]apm.Finding{}, resolved: map[uint64]bool{}, boot: map[uint64]string{}}
	if path == "" {
		return l
	}
	for _, p := range []string{path + ".1", path} { // oldest first
		if err := l.read(p); err != nil && !os.IsNotExist(err) {
			warn("restore: finding log not read", "path", p, "err", err)
		}
	}
	return l
}

func (l *logged) read(path string) error {
	// the log decides what the actor may act on: only a file nobody else
	// may write is read
	f, fi, err := trusted.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi.Size() > maxLogRead {
		if _, err := f.Seek(fi.Size()-maxLogRead, io.SeekStart); err != nil {
			return err
		}
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxLogRead))
	sc.Buffer(make([]byte, 64<<10), maxLogLine)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' || !bytes.Contains(b, []byte(`"id"`)) {
			continue // a line cut by the seek, or not a finding line
		}
		var x logLine
		if json.Unmarshal(b, &x) != nil || x.ID == 0 {
			continue
		}
		l.take(x)
	}
	return sc.Err()
}

// take files one line.
func (l *logged) take(x logLine) {
	l.maxID = max(l.maxID, x.ID)
	if x.Type == findingline.TypeResolution || x.Resolved {
		l.resolved[x.Resolves] = true
		delete(l.open, x.Resolves)
		delete(l.boot, x.Resolves)
		return
	}
	sev, err := apm.ParseSeverity(x.Severity)
	if err != nil {
		return
	}
	f := apm.Finding{ID: x.ID, Kind: x.Kind, Severity: sev, QP: x.QP, PID: x.PID, Comm: x.Comm, First: x.First, Last: x.Last, FirstTime: x.FirstAt}
	l.byKey[keyOf(f)] = x.ID
	if sev >= apm.SevWarning && !l.resolved[x.ID] && len(l.open) < maxLogOpen {
		l.open[x.ID] = f
		l.boot[x.ID] = x.BootID
	}
}

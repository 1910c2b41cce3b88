package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/recording"
)

// Bundle file names (docs/audit.md).
const (
	BundleEvents   = "events.rec"     // plain recording: apmwatch postmortem DIR/events.rec
	BundleFindings = "findings.jsonl" // the finding log lines of the bundle's findings
	BundleQPs      = "qps.json"       // rdma netlink rows of the QPs involved
	BundleInfo     = "bundle.json"    // what the bundle is, and how to replay it
	incidentsDir   = "incidents"
)

// bundle is an incident bundle being gathered: the findings that came
// before it is written, and the netlink rows read when each came.
type bundle struct {
	dir   string    // final directory
	due   time.Time // when it is written
	from  uint64    // Boot of the first event it keeps
	lines []findingline.Line
	qps   []rdmanl.QP
	keys  map[event.QPKey]bool
	errs  []string // netlink errors
	// the last rdma netlink reading (snapshot), reused within snapshotReuse
	snap    rdmanl.Snapshot
	snapErr error
	snapAt  time.Time
	// Filled when it is handed to the writer.
	files []string
	host  string
}

// BundleQPsFile is the layout of qps.json.
type BundleQPsFile struct {
	Schema int         `json:"schema"`  // BundleSchema
	Boot   uint64      `json:"boot_ns"` // CLOCK_BOOTTIME of the last reading
	QPs    []rdmanl.QP `json:"qps"`     // rows of the QPs involved that existed then
	Errors []string    `json:"errors,omitempty"`
}

// BundleSchema is the version of a bundle's JSON files (qps.json,
// bundle.json), their "schema": a version only adds fields; one that
// removes or changes a field is a new number.
const BundleSchema = 1

// BundleInfoFile is the layout of bundle.json.
type BundleInfoFile struct {
	Schema   int      `json:"schema"` // BundleSchema
	Host     string   `json:"host"`
	Created  string   `json:"created"`
	Findings []uint64 `json:"findings"`
	Events   uint64   `json:"events"`
	FromBoot uint64   `json:"from_boot_ns"`
	Replay   string   `json:"replay"`
	Warnings []string `json:"warnings,omitempty"`
}

func newBundle(root string, now time.Time, first findingline.Line, after time.Duration, from uint64) *bundle {
	name := fmt.Sprintf("%s-%s-%s-%d", now.UTC().Format("20060102T150405.000Z"), first.Kind, first.QP.Device, first.QP.QPN)
	return &bundle{dir: filepath.Join(root, incidentsDir, name), due: now.Add(after), from: from, keys: map[event.QPKey]bool{}}
}

// addQPs keeps the snapshot rows of key (read when its finding came).
func (b *bundle) addQPs(key event.QPKey, snap rdmanl.Snapshot, err error) {
	if b.keys[key] {
		return
	}
	b.keys[key] = true
	if err != nil {
		b.errs = append(b.errs, err.Error())
		return
	}
	for _, q := range snap.QPs {
		if q.Device == key.Device && q.LQPN == key.QPN {
			b.qps = append(b.qps, q)
		}
	}
}

// snapshotReuse is how long one rdma netlink reading serves the bundle's
// findings. A port failure brings thousands of findings at once; a dump of
// every QP for each of them made the daemon quadratic in the QPs (a
// 4,000-QP storm in the lab judged about two findings a second).
const snapshotReuse = time.Second

// snapshot returns a reading for the rows of a new finding's QP: the
// bundle's last one when it is younger than snapshotReuse, else a new one.
func (b *bundle) snapshot(now time.Time, read func() (rdmanl.Snapshot, error)) (rdmanl.Snapshot, error) {
	if b.snapAt.IsZero() || now.Before(b.snapAt) || now.Sub(b.snapAt) >= snapshotReuse {
		b.snap, b.snapErr = read()
		b.snapAt = now
	}
	return b.snap, b.snapErr
}

func (b *bundle) has(id uint64) bool {
	return slices.ContainsFunc(b.lines, func(l findingline.Line) bool { return l.ID == id })
}

// writeBundle writes b: the slice of the flight recorder's files from
// b.from on as one new plain recording, the finding lines, the netlink rows.
// It writes into DIR.tmp and renames, so a bundle directory is complete.
func writeBundle(ctx context.Context, b *bundle) (err error) {
	tmp := b.dir + ".tmp"
	if err := outfile.MkdirAll(tmp); err != nil {
		return fmt.Errorf("creating bundle: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	events, warns, err := copySlice(ctx, b.files, filepath.Join(tmp, BundleEvents), b.from)
	if err != nil {
		return err
	}
	var fl strings.Builder
	ids := []uint64{}
	for _, l := range b.lines {
		line, _ := json.Marshal(escape.Value(l))
		fl.Write(line)
		fl.WriteByte('\n')
		if l.Type == findingline.TypeFinding {
			ids = append(ids, l.ID)
		}
	}
	if err := outfile.WriteFile(filepath.Join(tmp, BundleFindings), []byte(fl.String())); err != nil {
		return fmt.Errorf("writing bundle findings: %w", err)
	}
	var boot uint64
	if len(b.lines) > 0 {
		boot = b.lines[len(b.lines)-1].Last
	}
	if err := writeJSON(filepath.Join(tmp, BundleQPs), BundleQPsFile{Schema: BundleSchema, Boot: boot, QPs: append([]rdmanl.QP{}, b.qps...), Errors: b.errs}); err != nil {
		return err
	}
	info := BundleInfoFile{Schema: BundleSchema, Host: b.host, Created: time.Now().UTC().Format(time.RFC3339Nano), Findings: ids,
		Events: events, FromBoot: b.from, Warnings: warns,
		Replay: "apmwatch postmortem " + filepath.Join(b.dir, BundleEvents)}
	if err := writeJSON(filepath.Join(tmp, BundleInfo), info); err != nil {
		return err
	}
	if err := os.Rename(tmp, b.dir); err != nil {
		return fmt.Errorf("finishing bundle: %w", err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(escape.Value(v), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", filepath.Base(path), err)
	}
	if err := outfile.WriteFile(path, append(data, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

// copySlice copies the events with Boot >= from of the recordings in files
// (read as one stream) into a new recording at out, with the source's
// counters. The file being written by the recorder has no end record yet:
// that warning is expected and not kept.
func copySlice(ctx context.Context, files []string, out string, from uint64) (uint64, []string, error) {
	if len(files) == 0 {
		return 0, nil, errors.New("no flight recorder files to slice")
	}
	var warns []string
	r, err := recording.OpenWith(recording.ReadOptions{OnWarning: func(w recording.Warning) {
		if !strings.Contains(w.Msg, "no end record") && !strings.Contains(w.Msg, "file cut inside a frame") {
			warns = append(warns, w.String())
		}
	}}, files...)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the flight recorder: %w", err)
	}
	defer r.Close()
	w, err := recording.Create(out, r.Meta(), recording.Options{Compress: true, FlushInterval: -1})
	if err != nil {
		return 0, nil, err
	}
	var n uint64
	for {
		e, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.Close()
			return 0, nil, fmt.Errorf("reading the flight recorder: %w", err)
		}
		if e.Boot < from {
			continue
		}
		if err := w.Write(e); err != nil {
			w.Close()
			return 0, nil, err
		}
		n++
	}
	if err := w.WriteStats(r.Stats()); err != nil {
		w.Close()
		return 0, nil, err
	}
	if err := w.Close(); err != nil {
		return 0, nil, err
	}
	return n, warns, nil
}

// pruneBundles keeps the newest max bundles under root (names sort by time).
func pruneBundles(root string, keep int) {
	dir := filepath.Join(root, incidentsDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for len(names) > keep {
		os.RemoveAll(filepath.Join(dir, names[0]))
		names = names[1:]
	}
}

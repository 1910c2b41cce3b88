package postmortem

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apmwatch/apmwatch/connid"
	"github.com/apmwatch/apmwatch/recording"
)

// stream is one writer session: the rotated files of one `apmwatch record`
// or `trace --record` run. Each stream is replayed through a model of its
// own: two sessions may have run at the same time (two instances standing
// in for two hosts), so their events cannot be merged into one stream.
type stream struct {
	label  string // side name: the host, or what --as said
	files  []string
	hdr    recording.Header // of the first file
	size   int64            // bytes of every file
	mtime  time.Time        // newest file modification: about when recording stopped
	offset time.Duration    // boot-to-wall offset used for aligned times
	shift  time.Duration    // correction from the causal clock bounds

	h       histories
	raw     []finding // the model's findings and resolutions, in order
	mads    []mad
	ports   map[string][]connid.Addr // device -> addresses its MADs prove
	losses  []recording.Loss         // stretches of missing records
	last    uint64                   // Boot of the last event
	endBoot uint64                   // the model was advanced to here
	res     streamResult
}

// group reads every file's header and groups the files by session. Labels
// come from as (file -> label), else from the recorded host name; two
// sessions with the same label get the first file's base name appended.
func group(paths []string, as map[string]string) ([]*stream, error) {
	bySession := map[uint64]*stream{}
	var out []*stream
	for _, p := range paths {
		r, err := recording.Open(p)
		if err != nil {
			return nil, err
		}
		hdr := r.Headers()[0]
		r.Close()
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("opening recording: %w", err)
		}
		s := bySession[hdr.Session]
		if s == nil {
			label := as[p]
			if label == "" {
				label = hdr.Meta.Host
			}
			if label == "" {
				label = filepath.Base(p)
			}
			s = &stream{label: label, hdr: hdr}
			bySession[hdr.Session] = s
			out = append(out, s)
		} else if l := as[p]; l != "" && l != s.label {
			return nil, fmt.Errorf("%s is a segment of the recording labelled %q: cannot label it %q", p, s.label, l)
		}
		s.files = append(s.files, p)
		s.size += fi.Size()
		if fi.ModTime().After(s.mtime) {
			s.mtime = fi.ModTime()
		}
	}
	seen := map[string]int{}
	for _, s := range out {
		seen[s.label]++
	}
	for _, s := range out {
		if seen[s.label] > 1 {
			s.label += ":" + filepath.Base(s.files[0])
		}
	}
	return out, nil
}

// alignClocks sets each stream's offset: streams of one boot of one host
// (same host name, boot-to-wall offsets within a second) share one
// CLOCK_BOOTTIME and are aligned exactly with the first one's offset;
// others use their own offset (their wall clocks).
func alignClocks(ss []*stream) {
	for i, s := range ss {
		s.offset = s.hdr.Meta.BootOffset
		for _, o := range ss[:i] {
			if sameClock(o, s) {
				s.offset = o.offset
				break
			}
		}
	}
}

func sameClock(a, b *stream) bool {
	d := a.hdr.Meta.BootOffset - b.hdr.Meta.BootOffset
	return a.hdr.Meta.Host != "" && a.hdr.Meta.Host == b.hdr.Meta.Host && d < time.Second && d > -time.Second
}

// wall is the aligned wall-clock time of a Boot stamp of s.
func (s *stream) wall(boot uint64) time.Time {
	return time.Unix(0, int64(boot)+int64(s.offset)+int64(s.shift)).UTC()
}

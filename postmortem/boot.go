package postmortem

import (
	"strconv"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

// onceKey names a finding of one boot of one host: two recordings of that
// boot given together (the flight recorder and an operator's `record`)
// judge the same kernel events, with the same stamps, and give it once.
type onceKey struct {
	boot  string
	dev   string
	qpn   uint32
	kind  apm.Kind
	first uint64
}

// bootKey names the boot a stream was recorded in: its host and boot id,
// or (recordings made before headers carried one) its boot-to-wall offset
// to the second.
func bootKey(s *stream) string {
	m := s.hdr.Meta
	if m.BootID != "" {
		return m.Host + "\x00" + m.BootID
	}
	return m.Host + "\x00~" + strconv.FormatInt(int64(m.BootOffset/time.Second), 10)
}

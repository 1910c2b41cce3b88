package recording

import (
	"bytes"
	"strings"
	"testing"
)

// Frame headers one after another, each claiming a payload up to the end
// of the file with a wrong checksum: resynchronising checks each claim, so
// without a bound the work grows with the square of the file. The reader
// gives up after checking resyncFactor times what it read (plus
// resyncAllowance) and says so once.
func TestResyncWorkBounded(t *testing.T) {
	for _, size := range []int{1 << 20, 40 << 20} { // under and over a frame's 16 MiB
		var b bytes.Buffer
		w, err := NewWriter(&b, testMeta(), Options{FlushInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		w.Flush()
		data := b.Bytes()
		for len(data)+12 <= size {
			claim := min(size-len(data)-12, maxPayload)
			data = append(data, 0xa9, 'A', 'P', 'W', 'R', byte(claim), byte(claim>>8), byte(claim>>16), 1, 2, 3, 4)
		}
		var warns []string
		sc := newScanner(bytes.NewReader(data), func(off int64, msg string) { warns = append(warns, msg) })
		if _, err := readHeader(sc); err != nil {
			t.Fatal(err)
		}
		for {
			if _, _, _, ok := sc.next(); !ok {
				break
			}
		}
		limit := resyncFactor*sc.offset() + resyncAllowance + maxPayload // the last claim checked
		if sc.wasted > limit {
			t.Errorf("%d bytes: %d bytes checksummed for false frames, limit %d", size, sc.wasted, limit)
		}
		if size > maxPayload && (len(warns) != 1 || !strings.Contains(warns[0], "resynchronising checked")) {
			t.Errorf("%d bytes: want one warning that resynchronisation gave up, got %q", size, warns)
		}
	}
}

package fabric

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Limits bound what a parser accepts from a file.
type Limits struct {
	MaxBytes   int64 // the whole file
	MaxLine    int   // one line, in bytes
	MaxNodes   int   // nodes of a topology, switches of an LFT dump
	MaxPorts   int   // the highest port number of a node
	MaxEntries int   // forwarding entries of a whole LFT dump
}

// DefaultLimits fit the largest fabrics a unicast LID space holds, with a
// few LFT entries per LID per switch to spare.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:   1 << 30,
		MaxLine:    4096,
		MaxNodes:   MaxUnicastLID,
		MaxPorts:   254,
		MaxEntries: 64 << 20,
	}
}

// MaxUnicastLID is the highest unicast LID (0xc000 and up are multicast).
const MaxUnicastLID = 0xbfff

// lineReader yields the lines of a file within Limits, numbered from 1.
type lineReader struct {
	r    *bufio.Reader
	lim  Limits
	n    int   // the line number of the last line read
	read int64 // bytes read
}

func newLineReader(r io.Reader, lim Limits) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(io.LimitReader(r, lim.MaxBytes+1), 64<<10), lim: lim}
}

// next returns the next line without its end (and a trailing \r), or
// io.EOF after the last.
func (l *lineReader) next() ([]byte, error) {
	var line []byte
	for {
		frag, err := l.r.ReadSlice('\n')
		l.read += int64(len(frag))
		if l.read > l.lim.MaxBytes {
			return nil, fmt.Errorf("file larger than %d bytes", l.lim.MaxBytes)
		}
		if len(line)+len(frag) > l.lim.MaxLine+2 {
			l.n++
			return nil, fmt.Errorf("line %d: longer than %d bytes", l.n, l.lim.MaxLine)
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			l.n++
			return trimEOL(line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(line) == 0 {
				return nil, io.EOF
			}
			l.n++
			return trimEOL(line), nil
		default:
			return nil, fmt.Errorf("line %d: %w", l.n+1, err)
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// errorf is a parse error at line n.
func (l *lineReader) errorf(format string, a ...any) error {
	return fmt.Errorf("line %d: %s", l.n, fmt.Sprintf(format, a...))
}

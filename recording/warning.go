package recording

import "fmt"

// Warning is something a reader skipped or could not trust: a file cut
// inside a frame, a damaged stretch, a record of an unknown type. A replay
// goes on after a warning; what was lost is in Msg.
type Warning struct {
	File   string // path of the file, empty for NewReader's input
	Offset int64  // byte offset in the file where the problem starts
	Msg    string
}

func (w Warning) String() string {
	if w.File == "" {
		return fmt.Sprintf("offset %d: %s", w.Offset, w.Msg)
	}
	return fmt.Sprintf("%s: offset %d: %s", w.File, w.Offset, w.Msg)
}

// maxWarnings bounds the warnings a Reader keeps for Warnings; the
// OnWarning callback still sees all of them.
const maxWarnings = 1000

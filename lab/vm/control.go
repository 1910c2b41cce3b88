package vm

import (
	"strconv"
	"strings"
)

// A Control is one "@lab key=value ..." line the guest init writes on its
// control port. Values may be double-quoted (no escapes).
type Control map[string]string

// ParseControl parses a control line; ok is false for any other line.
func ParseControl(line string) (c Control, ok bool) {
	line = strings.TrimSpace(line)
	rest, ok := strings.CutPrefix(line, "@lab ")
	if !ok {
		return nil, false
	}
	c = Control{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		key, after, found := strings.Cut(rest, "=")
		if !found || key == "" || strings.ContainsAny(key, " \"") {
			return nil, false
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			end := strings.IndexByte(after[1:], '"')
			if end < 0 {
				return nil, false
			}
			val, rest = after[1:1+end], after[2+end:]
		} else {
			val, rest, _ = strings.Cut(after, " ")
		}
		c[key] = val
	}
	return c, true
}

// Exit returns the command's exit status if the line reports one.
func (c Control) Exit() (int, bool) {
	v, ok := c["exit"]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 255 {
		return 0, false
	}
	return n, true
}

// Package escape makes strings from the host (process names, device names,
// hook names, anything read from a recording) safe to print: control
// characters and invalid UTF-8 become visible escapes, so such a string can
// neither move the cursor, clear the screen nor start a line of its own.
//
// The escapes form a small grammar that Unescape inverts exactly:
//
//	\\       a backslash
//	\xNN     the byte NN: a C0 control (00-1f), DEL (7f), or a byte that is
//	         not part of valid UTF-8
//	\uNNNN   the code point U+NNNN: a C1 control (U+0080-U+009F), a line or
//	         paragraph separator, a bidirectional formatting character, or
//	         an invisible zero-width one (U+200B-U+200D, U+2060, U+FEFF),
//	         which would make two different names print alike
//
// Every other character is itself, so ordinary names print unchanged.
// Human-readable outputs print Text(s); JSON outputs carry Text(s) as the
// string value too (valid UTF-8 whatever s was), from which Unescape gives
// back the original bytes.
package escape

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Text returns s with every control character, backslash and invalid UTF-8
// byte escaped. A string that needs nothing is returned as is.
func Text(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if c == '\\' {
			b.WriteString(`\\`)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1, r < 0x20, r == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			i++
			continue
		case special(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[(r>>shift)&0xf])
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// clean reports whether s is printable ASCII without a backslash: the
// common case, which Text returns without copying.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// special reports the valid code points above ASCII that Text escapes:
// C1 controls, which terminals may take for ESC sequences (U+009B is CSI),
// the line and paragraph separators, and the bidirectional formatting
// characters, which reorder what follows them on the line.
func special(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r >= 0x200b && r <= 0x200d, r == 0x2060, r == 0xfeff:
		return true // zero-width: invisible, so "lab\u200bpair" would print as "labpair"
	}
	return false
}

var errBadEscape = errors.New("bad escape")

// Unescape returns the original bytes of a string Text produced.
func Unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", errBadEscape
		}
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
			i++
		case 'x':
			if i+4 > len(s) {
				return "", errBadEscape
			}
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return "", errBadEscape
			}
			b.WriteByte(byte(v))
			i += 3
		case 'u':
			if i+6 > len(s) {
				return "", errBadEscape
			}
			v, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
			if err != nil {
				return "", errBadEscape
			}
			b.WriteRune(rune(v))
			i += 5
		default:
			return "", errBadEscape
		}
	}
	return b.String(), nil
}

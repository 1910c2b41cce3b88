package wire

import (
	"strings"
	"testing"
)

// tokenByRunes is a subject token as hosts' publishers have always made
// it: a rune at a time.
func tokenByRunes(s string) string {
	if s == "" {
		return "_"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// FuzzTokenAsRunes: the token of any name (the fast path for names that
// are tokens already) is what a rune at a time gives, and isToken says
// whether a name is its own token.
func FuzzTokenAsRunes(f *testing.F) {
	for _, s := range []string{"", "node0001", "mlx5_0", "a.b", "h\xff\xfe", "ñode", "x y*>", strings.Repeat("z", 70), strings.Repeat("é", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Token(s), tokenByRunes(s); got != want {
			t.Fatalf("token(%q) = %q, want %q", s, got, want)
		}
		if got, want := isToken(s), s != "" && len(s) <= 64 && tokenByRunes(s) == s; got != want {
			t.Fatalf("isToken(%q) = %v, want %v", s, got, want)
		}
	})
}

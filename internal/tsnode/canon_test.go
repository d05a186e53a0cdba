package tsnode

import "testing"

// TestDecodedString checks the WHATWG replacement of invalid UTF-8: one
// U+FFFD per maximal subpart, not per byte as Go's range loop gives.
func TestDecodedString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\uFEFFa", "\uFEFFa"},
		{"\xff", "\uFFFD"},
		{"\xe2\x82a", "\uFFFDa"},               // truncated 3-byte sequence: one replacement
		{"\xf0\x9f\x98", "\uFFFD"},             // truncated 4-byte sequence at the end
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // a surrogate: ED only allows 80..9F next
		{"\xe0\x80\xaf", "\uFFFD\uFFFD\uFFFD"}, // overlong
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"a\x80b", "a\uFFFDb"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{"é\xe2\x82\xac", "é€"},
	} {
		if got := DecodedString(c.in); got != c.want {
			t.Errorf("DecodedString(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

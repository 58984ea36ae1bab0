package catalog

import (
	"bytes"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestUnescapeKeyInvertsEscapeKey(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SliceOfN(rapid.Byte(), 0, 80).Draw(t, "key")
		back, err := UnescapeKey(EscapeKey(k))
		if err != nil || !bytes.Equal(back, k) {
			t.Fatalf("UnescapeKey(EscapeKey(%q)) = %q, %v", k, back, err)
		}
	})
}

func TestUnescapeKeyErrorsSayWhere(t *testing.T) {
	for in, want := range map[string]string{
		`a\q`:    `unknown escape \q at byte 1`,
		`abc\`:   "lone backslash at the end",
		`\x4`:    `escape \x4 at byte 0 needs 2 hex digits`,
		`\400`:   `octal escape \400 at byte 0 is above \377`,
		`\ud800`: "not a valid Unicode code point",
	} {
		if _, err := UnescapeKey(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("UnescapeKey(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

// FuzzUnescapeKey: UnescapeKey reads outside text (command lines, URL
// parameters); it never panics, and what it accepts escapes back to a form
// that reads to the same bytes.
func FuzzUnescapeKey(f *testing.F) {
	for _, s := range []string{"user:42", `\x00\xff`, `\u00e9\U0001F600`, `\101\\\"`, `a\q`, `\`, `\x4`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := UnescapeKey(s)
		if err != nil {
			return
		}
		back, err := UnescapeKey(EscapeKey(k))
		if err != nil || !bytes.Equal(back, k) {
			t.Fatalf("UnescapeKey(EscapeKey(%q)) = %q, %v", k, back, err)
		}
	})
}

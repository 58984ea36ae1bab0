package main

import (
	"bytes"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseKey(t *testing.T) {
	good := []struct {
		in   string
		hex  bool
		want []byte
	}{
		{"user:42", false, []byte("user:42")},
		{"", false, []byte{}},
		{`user:42\x00`, false, []byte("user:42\x00")},
		{`\x00\xff\xFf`, false, []byte{0, 0xff, 0xff}},
		{`\a\b\f\n\r\t\v`, false, []byte("\a\b\f\n\r\t\v")},
		{`\\ \" \'`, false, []byte(`\ " '`)},
		{`\000\101\377`, false, []byte{0, 'A', 0xff}},
		{`caf\u00e9 \U0001F600`, false, []byte("café 😀")},
		{`"quoted" literally`, false, []byte(`"quoted" literally`)},
		{"raw\nnewline", false, []byte("raw\nnewline")},
		{"757365723a3432", true, []byte("user:42")},
		{"0x00FF", true, []byte{0, 0xff}},
		{"", true, []byte{}},
	}
	for _, tc := range good {
		got, err := parseKey(tc.in, tc.hex)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("parseKey(%q, hex=%v) = %q, %v; want %q", tc.in, tc.hex, got, err, tc.want)
		}
	}
	bad := []struct {
		in   string
		hex  bool
		want string
	}{
		{`a\q`, false, `unknown escape \q at byte 1`},
		{`abc\`, false, "lone backslash at the end"},
		{`\x4`, false, `escape \x4 at byte 0 needs 2 hex digits`},
		{`\xg0`, false, `escape \xg0 at byte 0 needs 2 hex digits`},
		{`\18`, false, `escape \18 at byte 0 needs 3 octal digits`},
		{`\400`, false, `octal escape \400 at byte 0 is above \377`},
		{`\ud800`, false, `not a valid Unicode code point`},
		{`\U00110000`, false, `not a valid Unicode code point`},
		{`\u12`, false, `needs 4 hex digits`},
		{"abc", true, "odd number of hex digits"},
		{"zz", true, `'z' is not a hex digit`},
		{strings.Repeat("k", 4098), false, "KEY is 4098 bytes; keys are at most 4097"},
		{strings.Repeat("00", 4098), true, "KEY is 4098 bytes"},
	}
	for _, tc := range bad {
		_, err := parseKey(tc.in, tc.hex)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseKey(%.20q, hex=%v) = %v, want an error containing %q", tc.in, tc.hex, err, tc.want)
		}
	}
}

func TestFormatKey(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{nil, `""`},
		{[]byte("user:42"), `"user:42"`},
		{[]byte("user:42\x00"), `"user:42\x00"`},
		{[]byte("a\"b\\c\n\xff é"), `"a\"b\\c\x0a\xff \xc3\xa9"`},
		{bytes.Repeat([]byte("a"), 48), `"` + strings.Repeat("a", 48) + `"`},
		{append(bytes.Repeat([]byte("a"), 48), '\x01'), `"` + strings.Repeat("a", 48) + `..."(49 bytes)`},
	}
	for _, tc := range tests {
		if got := formatKey(tc.in); got != tc.want {
			t.Errorf("formatKey(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := formatEnd(nil); got != "+inf" {
		t.Errorf("formatEnd(nil) = %s, want +inf", got)
	}
}

// TestKeyRoundTrip: whatever the bytes, the escaped form a table prints
// parses back to them, and is printable ASCII only.
func TestKeyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SliceOfN(rapid.Byte(), 0, 80).Draw(t, "key")
		esc := escapeKey(k)
		checkRoundTrip(t, k, esc)
		if len(k) <= keyShown && formatKey(k) != `"`+esc+`"` {
			t.Fatalf("formatKey(%q) = %s, want the quoted escape", k, formatKey(k))
		}
	})
}

func checkRoundTrip(t interface{ Fatalf(string, ...any) }, k []byte, esc string) {
	for i := 0; i < len(esc); i++ {
		if esc[i] < 0x20 || esc[i] >= 0x7f {
			t.Fatalf("escapeKey(%q) = %q holds byte %#x", k, esc, esc[i])
		}
	}
	back, err := parseKey(esc, false)
	if err != nil || !bytes.Equal(back, k) {
		t.Fatalf("parseKey(escapeKey(%q)) = %q, %v", k, back, err)
	}
}

// FuzzParseKey: parseKey never panics, and what it accepts survives an
// escape round trip.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"user:42", `\x00\xff`, `\u00e9\U0001F600`, `\101\\\"`, `a\q`, `\`, `\x4`} {
		f.Add(s, false)
	}
	f.Add("0x00ff", true)
	f.Fuzz(func(t *testing.T, s string, asHex bool) {
		k, err := parseKey(s, asHex)
		if err != nil {
			return
		}
		checkRoundTrip(t, k, escapeKey(k))
	})
}

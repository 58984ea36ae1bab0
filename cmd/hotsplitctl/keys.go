package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hotsplit/hotsplit/catalog"
)

// keyShown is how many bytes of a key a table shows before shortening it.
const keyShown = 48

// keyHelp is the KEY paragraph of every command that takes a key.
const keyHelp = `KEY is taken literally, except that Go escape sequences are interpreted:
\xNN (one byte), \NNN (octal byte), \a \b \f \n \r \t \v \\ \" \',
\uNNNN and \UNNNNNNNN (UTF-8). Tables print keys in the same escaped form,
so a key copied from a table (without its quotes) can be pasted back.
With --hex, KEY is hexadecimal bytes (an optional 0x prefix is allowed).
Keys are at most 4097 bytes.`

// formatKey renders a key for tables: quoted, printable ASCII as is, " and
// \ escaped, every other byte as \xNN; a key longer than keyShown bytes is
// cut there and followed by its length.
func formatKey(k []byte) string {
	if len(k) <= keyShown {
		return `"` + escapeKey(k) + `"`
	}
	return `"` + escapeKey(k[:keyShown]) + `..."(` + strconv.Itoa(len(k)) + ` bytes)`
}

// formatEnd renders a route end: +inf when unbounded.
func formatEnd(k []byte) string {
	if len(k) == 0 {
		return "+inf"
	}
	return formatKey(k)
}

// formatSpan renders a route's key range as ["start", "end").
func formatSpan(start, end []byte) string {
	return "[" + formatKey(start) + ", " + formatEnd(end) + ")"
}

// escapeKey is the inverse of parseKey: parseKey(escapeKey(k)) == k.
func escapeKey(k []byte) string { return catalog.EscapeKey(k) }

// parseKey reads a KEY argument: literal bytes with Go escape sequences
// interpreted, or hexadecimal with asHex. Errors say what is wrong and where.
func parseKey(s string, asHex bool) ([]byte, error) {
	var k []byte
	if asHex {
		h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
		var err error
		if k, err = hex.DecodeString(h); err != nil {
			var bad hex.InvalidByteError
			if errors.As(err, &bad) {
				return nil, fmt.Errorf("KEY '%s' (--hex): %q is not a hex digit", s, rune(bad))
			}
			return nil, fmt.Errorf("KEY '%s' (--hex): odd number of hex digits", s)
		}
	} else {
		var err error
		if k, err = unescapeKey(s); err != nil {
			return nil, fmt.Errorf("KEY '%s': %v", s, err)
		}
	}
	if len(k) > catalog.MaxBoundaryLen {
		return nil, fmt.Errorf("KEY is %d bytes; keys are at most %d", len(k), catalog.MaxBoundaryLen)
	}
	return k, nil
}

func unescapeKey(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return nil, fmt.Errorf("lone backslash at the end (write \\\\ for a backslash)")
		}
		e := s[i+1]
		switch e {
		case 'a', 'b', 'f', 'n', 'r', 't', 'v', '\\', '"', '\'':
			out = append(out, simpleEscapes[e])
			i += 2
		case 'x':
			v, err := escapeDigits(s, i, 2, 16)
			if err != nil {
				return nil, err
			}
			out = append(out, byte(v))
			i += 4
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, err := escapeDigits(s, i, 3, 8)
			if err != nil {
				return nil, err
			}
			if v > 0xff {
				return nil, fmt.Errorf("octal escape %s at byte %d is above \\377", s[i:i+4], i)
			}
			out = append(out, byte(v))
			i += 4
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			v, err := escapeDigits(s, i, n, 16)
			if err != nil {
				return nil, err
			}
			r := rune(v)
			if v > utf8.MaxRune || !utf8.ValidRune(r) {
				return nil, fmt.Errorf("escape %s at byte %d is not a valid Unicode code point", s[i:i+2+n], i)
			}
			out = utf8.AppendRune(out, r)
			i += 2 + n
		default:
			return nil, fmt.Errorf("unknown escape \\%c at byte %d (write \\\\ for a backslash)", e, i)
		}
	}
	return out, nil
}

var simpleEscapes = map[byte]byte{
	'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v',
	'\\': '\\', '"': '"', '\'': '\'',
}

// escapeDigits reads the n digits in base that follow the escape letter at
// s[i+1] (for octal, the letter is the first digit).
func escapeDigits(s string, i, n, base int) (uint64, error) {
	from := i + 2
	digits := "hex"
	if base == 8 {
		from, digits = i+1, "octal"
	}
	if from+n > len(s) || !allDigits(s[from:from+n], base) {
		return 0, fmt.Errorf("escape %s at byte %d needs %d %s digits", s[i:min(from+n, len(s))], i, n, digits)
	}
	return strconv.ParseUint(s[from:from+n], base, 64)
}

func allDigits(s string, base int) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= '0' && c <= '7' ||
			base == 16 && (c >= '8' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')
		if !ok {
			return false
		}
	}
	return true
}

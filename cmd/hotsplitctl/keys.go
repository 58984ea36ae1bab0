package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
		if k, err = catalog.UnescapeKey(s); err != nil {
			return nil, fmt.Errorf("KEY '%s': %v", s, err)
		}
	}
	if len(k) > catalog.MaxBoundaryLen {
		return nil, fmt.Errorf("KEY is %d bytes; keys are at most %d", len(k), catalog.MaxBoundaryLen)
	}
	return k, nil
}

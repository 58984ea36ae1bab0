package catalog

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// UnescapeKey reads a key in the escaped form of EscapeKey, as operators
// type it and tables, logs and the web API print it: bytes taken literally
// except Go's escape sequences \xNN, \NNN (octal), \a \b \f \n \r \t \v
// \\ \" \' and \uNNNN, \UNNNNNNNN (UTF-8). UnescapeKey(EscapeKey(k)) == k
// for every k. Errors say what is wrong and at which byte. It does not
// check the length: callers compare against MaxKeyLen or MaxBoundaryLen.
func UnescapeKey(s string) ([]byte, error) {
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

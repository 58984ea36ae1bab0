package webui

import "fmt"

// A layout says which rows of an answer start a band, as a bitmap over the
// rows in hexadecimal: digit k holds rows 4k..4k+3, the highest bit (8)
// for row 4k, so the digits read in row order ("a" over three rows: bands
// start at rows 0 and 2). At most 256 digits for 1024 rows, whatever the
// number of bands: where layouts move every column (more routes than
// bands), a list of row numbers per layout would weigh almost as much as
// the values.

// layoutOf is the bitmap of rows (ascending, each below nrows).
func layoutOf(rows []uint32, nrows int) string {
	b := make([]byte, (nrows+3)/4)
	for _, r := range rows {
		b[r/4] |= 8 >> (r % 4)
	}
	for i, v := range b {
		b[i] = hexDigits[v]
	}
	return string(b)
}

// layoutRows reads a layout back: the rows that start a band, ascending.
func layoutRows(s string) ([]uint32, error) {
	var rows []uint32
	for i := 0; i < len(s); i++ {
		var v byte
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return nil, fmt.Errorf("layout: %q at %d is not a lower-case hexadecimal digit", c, i)
		}
		for bit := range uint32(4) {
			if v&(8>>bit) != 0 {
				rows = append(rows, uint32(4*i)+bit)
			}
		}
	}
	return rows, nil
}

package webui

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// A layout reads back as the rows it was made of, four rows a digit.
func TestLayoutRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nrows := rapid.IntRange(1, 1024).Draw(t, "rows")
		rows := []uint32{0}
		if nrows > 1 {
			rows = append(rows, rapid.SliceOfNDistinct(rapid.Uint32Range(1, uint32(nrows-1)), 0, nrows-1, rapid.ID).Draw(t, "starts")...)
		}
		slices.Sort(rows)
		s := layoutOf(rows, nrows)
		if len(s) != (nrows+3)/4 {
			t.Fatalf("%d digits for %d rows", len(s), nrows)
		}
		got, err := layoutRows(s)
		if err != nil || !slices.Equal(got, rows) {
			t.Fatalf("%v over %d rows: %q reads back as %v, %v", rows, nrows, s, got, err)
		}
	})
}

func TestLayoutExamples(t *testing.T) {
	for _, tc := range []struct {
		rows  []uint32
		nrows int
		want  string
	}{
		{[]uint32{0}, 1, "8"},
		{[]uint32{0, 2}, 3, "a"},
		{[]uint32{0, 1, 2, 3}, 4, "f"},
		{[]uint32{0, 5}, 6, "84"},
	} {
		if got := layoutOf(tc.rows, tc.nrows); got != tc.want {
			t.Errorf("layoutOf(%v, %d) = %q, want %q", tc.rows, tc.nrows, got, tc.want)
		}
	}
	for _, bad := range []string{"F", "g", "8 ", "-1"} {
		if rows, err := layoutRows(bad); err == nil {
			t.Errorf("layoutRows(%q) = %v, want an error", bad, rows)
		}
	}
}

package heatmap

import "unsafe"

// sameString reports whether a and b share their bytes (tests of
// interning only).
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

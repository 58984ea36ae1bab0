package catalog

import (
	"testing"
	"unsafe"
)

// A leaf must fit Go's 512-byte size class, or every leaf costs a ninth
// cache line and the lookup benchmark a page walk more often.
func TestLeafFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(leafNode{}); n > 512 {
		t.Fatalf("leafNode is %d bytes, more than the 512-byte size class", n)
	}
}

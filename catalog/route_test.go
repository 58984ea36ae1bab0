package catalog

import (
	"testing"
	"unsafe"
)

// A descriptor must stay in Go's 96-byte size class: a million routes
// hold a million of them, and merge lineage is a pointer for that reason.
func TestRouteDescriptorFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(RouteDescriptor{}); n > 96 {
		t.Fatalf("RouteDescriptor is %d bytes, more than the 96-byte size class", n)
	}
}

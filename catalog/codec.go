package catalog

import (
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"google.golang.org/protobuf/proto"
)

// ToProto returns the snapshot form of c, routes in key order. The
// descriptors' key slices are shared with c, not copied.
func (c *Catalog) ToProto() *api.CatalogSnapshot {
	s := &api.CatalogSnapshot{Version: c.version, NextRouteId: c.nextID, Routes: make([]*api.RouteDescriptor, 0, c.Len())}
	c.Ascend(func(r *RouteDescriptor) bool {
		s.Routes = append(s.Routes, r.ToProto())
		return true
	})
	return s
}

// FromProto rebuilds a catalog from its snapshot form and checks every
// invariant; a snapshot that breaks one is refused with ErrInvariant.
func FromProto(s *api.CatalogSnapshot) (*Catalog, error) {
	routes := make([]*RouteDescriptor, len(s.GetRoutes()))
	for i, p := range s.GetRoutes() {
		routes[i] = RouteFromProto(p)
	}
	c, err := build(s.GetVersion(), s.GetNextRouteId(), routes)
	if err != nil {
		return nil, fmt.Errorf("catalog snapshot at version %d: %w", s.GetVersion(), err)
	}
	return c, nil
}

// Encode returns the deterministic protobuf encoding of c.
func (c *Catalog) Encode() []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.ToProto())
	if err != nil {
		// Marshaling a well-formed in-memory message cannot fail.
		panic(fmt.Sprintf("catalog: encode: %v", err))
	}
	return b
}

// Decode parses an encoded catalog. Catalogs are replicated data: unknown
// fields and trailing garbage are rejected, and so is any catalog that
// breaks an invariant. Memory use is bounded by len(b).
func Decode(b []byte) (*Catalog, error) {
	var s api.CatalogSnapshot
	if err := api.UnmarshalStrict(b, &s); err != nil {
		return nil, fmt.Errorf("decode catalog: %w", err)
	}
	return FromProto(&s)
}

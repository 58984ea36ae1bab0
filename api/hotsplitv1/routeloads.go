package hotsplitv1

import (
	"fmt"
	"iter"
)

// RouteLoad is one entry of a RouteLoads column: a route's counts in one
// window.
type RouteLoad struct {
	RouteID               uint64
	Reads, Writes         uint64
	ReadBytes, WriteBytes uint64
}

// NewRouteLoads encodes loads, which must be sorted by strictly increasing
// route id (the leader builds it that way; Decode refuses anything else).
func NewRouteLoads(loads []RouteLoad) *RouteLoads {
	m := &RouteLoads{
		RouteIdDeltas: make([]uint64, len(loads)),
		Reads:         make([]uint64, len(loads)),
		Writes:        make([]uint64, len(loads)),
		ReadBytes:     make([]uint64, len(loads)),
		WriteBytes:    make([]uint64, len(loads)),
	}
	var prev uint64
	for i, l := range loads {
		m.RouteIdDeltas[i] = l.RouteID - prev
		prev = l.RouteID
		m.Reads[i], m.Writes[i], m.ReadBytes[i], m.WriteBytes[i] = l.Reads, l.Writes, l.ReadBytes, l.WriteBytes
	}
	return m
}

// Len is the number of routes listed.
func (m *RouteLoads) Len() int { return len(m.GetRouteIdDeltas()) }

// Check reports whether m is well formed: every list the same length,
// route ids strictly increasing from 1 and without overflow. The error
// names the field. Every reader of outside bytes calls it before All.
func (m *RouteLoads) Check() error {
	n := m.Len()
	for _, f := range []struct {
		name string
		len  int
	}{{"reads", len(m.GetReads())}, {"writes", len(m.GetWrites())}, {"read_bytes", len(m.GetReadBytes())}, {"write_bytes", len(m.GetWriteBytes())}} {
		if f.len != n {
			return fmt.Errorf("route_loads.%s: %d entries, route_id_deltas has %d", f.name, f.len, n)
		}
	}
	var id uint64
	for i, d := range m.GetRouteIdDeltas() {
		if d == 0 {
			return fmt.Errorf("route_loads.route_id_deltas[%d]: 0 (route ids must be positive and strictly increasing)", i)
		}
		if id+d < id {
			return fmt.Errorf("route_loads.route_id_deltas[%d]: route id overflows", i)
		}
		id += d
	}
	return nil
}

// All yields the entries in route id order. m must have passed Check.
func (m *RouteLoads) All() iter.Seq2[int, RouteLoad] {
	return func(yield func(int, RouteLoad) bool) {
		var id uint64
		for i, d := range m.GetRouteIdDeltas() {
			id += d
			if !yield(i, RouteLoad{RouteID: id, Reads: m.Reads[i], Writes: m.Writes[i], ReadBytes: m.ReadBytes[i], WriteBytes: m.WriteBytes[i]}) {
				return
			}
		}
	}
}

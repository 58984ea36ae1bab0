package heatmap

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// RouteLoad is the committed load of one route in one column: the
// per-route load field every column carries from cluster version 3 on.
type RouteLoad struct {
	RouteID    uint64
	Reads      uint64
	Writes     uint64
	ReadBytes  uint64
	WriteBytes uint64
}

// Weights are the replicated operation weights in force for a column; the
// weighted metric of a route is Write·writes + Read·reads.
type Weights struct {
	Read  uint32
	Write uint32
}

// ColumnInput is one committed load column as the state machine applies
// it.
type ColumnInput struct {
	// The column's window [WindowStartMs, AtMs); its length is the step in
	// force for that window (a step change simply gives later columns
	// another length).
	WindowStartMs uint64
	AtMs          uint64
	Weights       Weights
	// Catalog is the catalog the column applies to; its routes give the
	// band boundaries.
	Catalog *catalog.Catalog
	// Loads holds one entry per loaded live route, in any order, route ids
	// unique; a route without an entry had no load. Entries for routes not
	// in Catalog (split or merged away since the window) are ignored: the
	// load has no key range left to be drawn in.
	Loads []RouteLoad
}

// metrics is the number of totals kept per band, in this order.
const metrics = 4

// Metric selects one of the totals kept per band.
type Metric uint8

// The metrics, in the order of their values in a column.
const (
	MetricWeighted Metric = iota
	MetricReads
	MetricWrites
	MetricBytes
)

var metricNames = [metrics]string{"weighted", "reads", "writes", "bytes"}

func (m Metric) String() string {
	if int(m) < metrics {
		return metricNames[m]
	}
	return fmt.Sprintf("Metric(%d)", uint8(m))
}

// ParseMetric reads a metric name: weighted, reads, writes or bytes.
func ParseMetric(s string) (Metric, error) {
	for i, n := range metricNames {
		if s == n {
			return Metric(i), nil
		}
	}
	return 0, fmt.Errorf("%w: metric %q is not one of weighted, reads, writes, bytes", ErrInvalidInput, s)
}

// values returns the four totals of one route load.
func (l RouteLoad) values(w Weights) [metrics]uint64 {
	return [metrics]uint64{
		weighted(l.Reads, l.Writes, w),
		l.Reads,
		l.Writes,
		saturate.Add(l.ReadBytes, l.WriteBytes),
	}
}

// weighted is Write·writes + Read·reads, saturated at the largest uint64
// (the exact value needs up to 97 bits). Totals of absurd loads stop
// growing rather than wrap, and every replica saturates alike.
func weighted(reads, writes uint64, w Weights) uint64 {
	return saturate.Add(saturate.Mul(writes, uint64(w.Write)), saturate.Mul(reads, uint64(w.Read)))
}

// sortedLoads returns the loads sorted by route id (a copy when they were
// not), refusing duplicate route ids.
func sortedLoads(loads []RouteLoad) ([]RouteLoad, error) {
	byID := func(a, b RouteLoad) int { return cmp.Compare(a.RouteID, b.RouteID) }
	if !slices.IsSortedFunc(loads, byID) {
		loads = slices.Clone(loads)
		slices.SortFunc(loads, byID)
	}
	for i := 1; i < len(loads); i++ {
		if loads[i].RouteID == loads[i-1].RouteID {
			return nil, fmt.Errorf("%w: loads: route %d appears twice", ErrInvalidInput, loads[i].RouteID)
		}
	}
	return loads, nil
}

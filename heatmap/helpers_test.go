package heatmap

import (
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// tb is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// newCatalog builds a catalog with the given split keys (ids from 1 in key
// order).
func newCatalog(t tb, splits ...string) *catalog.Catalog {
	t.Helper()
	keys := make([][]byte, len(splits))
	for i, s := range splits {
		keys[i] = []byte(s)
	}
	c, err := catalog.New(keys, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// routeIDs lists the catalog's route ids in key order.
func routeIDs(c *catalog.Catalog) []uint64 {
	var ids []uint64
	c.Ascend(func(r *catalog.RouteDescriptor) bool {
		ids = append(ids, r.ID)
		return true
	})
	return ids
}

var unitWeights = Weights{Read: 1, Write: 1}

// mustAdd adds a column and fails the test on error.
func mustAdd(t tb, h *History, in ColumnInput) *History {
	t.Helper()
	next, err := h.AddColumn(in)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// totals sums each metric over every column kept.
func (h *History) totals() [metrics]uint64 {
	var t [metrics]uint64
	h.ascend(func(c *column, _ int) {
		for m := range metrics {
			for _, v := range c.values(Metric(m)) {
				t[m] += v
			}
		}
	})
	return t
}

const splitKind = api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT

func protoEqual(a, b proto.Message) bool { return proto.Equal(a, b) }

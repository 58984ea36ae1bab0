package keyviz

import (
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/saturate"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Field numbers of the messages whose framing limit.go adds up.
const (
	reportColumnsField = 2 // ReportRequest.columns
	columnRowsField    = 6 // ReportColumn.rows
)

// fieldSize is the encoded size of a length-delimited field of n bytes.
func fieldSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// columnBudget is the largest column that fits alone in a report of
// maxBytes from reporter id.
func columnBudget(id string, maxBytes int) int {
	overhead := proto.Size(&api.ReportRequest{ReporterId: id}) + protowire.SizeTag(reportColumnsField) + protowire.SizeVarint(uint64(maxBytes))
	return maxBytes - overhead
}

// trimColumn makes col fit in budget bytes, in place, and says what it
// removed. A column too big for one report cannot be split across reports
// (the cluster deduplicates by reporter and column, so a second part would
// be taken for a duplicate), so it sheds evidence from its lightest rows,
// where it matters least to a detector looking for hot routes: first the
// top keys and operation samples of rows in increasing weighted load (the
// row is then marked top_k_degraded, as its evidence is gone), then, if that is not enough,
// whole rows in the same order. Rows keep their route-id order. The heaviest
// rows — the only ones that can be hot — are the last to lose anything.
func trimColumn(col *api.ReportColumn, budget int) (strippedTopKeys, droppedRows int) {
	size := proto.Size(col)
	if size <= budget {
		return 0, 0
	}
	order := make([]int, len(col.Rows))
	for i := range order {
		order[i] = i
	}
	load := func(r *api.ReportRow) uint64 {
		return saturate.Add(saturate.Mul(r.Writes, uint64(col.WriteWeight)), saturate.Mul(r.Reads, uint64(col.ReadWeight)))
	}
	slices.SortStableFunc(order, func(a, b int) int {
		la, lb := load(col.Rows[a]), load(col.Rows[b])
		switch {
		case la < lb:
			return -1
		case la > lb:
			return 1
		}
		return 0
	})
	for _, i := range order {
		if size <= budget {
			return strippedTopKeys, 0
		}
		r := col.Rows[i]
		if len(r.TopKeys) == 0 && len(r.Samples) == 0 {
			continue
		}
		before := fieldSize(columnRowsField, proto.Size(r))
		if len(r.TopKeys) > 0 {
			r.TopKeys, r.TopKDegraded = nil, true
		}
		r.Samples = nil
		size -= before - fieldSize(columnRowsField, proto.Size(r))
		strippedTopKeys++
	}
	drop := make([]bool, len(col.Rows))
	for _, i := range order {
		if size <= budget {
			break
		}
		size -= fieldSize(columnRowsField, proto.Size(col.Rows[i]))
		drop[i] = true
		droppedRows++
	}
	kept := col.Rows[:0]
	for i, r := range col.Rows {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	col.Rows = kept
	return strippedTopKeys, droppedRows
}

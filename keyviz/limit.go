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
	rowDegradedField   = 9 // ReportRow.top_k_degraded
)

// degradedFieldSize is the encoded size of ReportRow.top_k_degraded when
// true: its tag and a one-byte varint.
var degradedFieldSize = protowire.SizeTag(rowDegradedField) + 1

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

// Trimmed says what TrimColumn shed from a column, in rows, and what the
// column's encoding takes after it.
type Trimmed struct {
	// EvidenceCapped rows lost their top keys and samples to the evidence
	// bound (api.MaxReportEvidenceBytes): routine on a busy node.
	EvidenceCapped int
	// EvidenceStripped rows lost them to the size bound.
	EvidenceStripped int
	// RowsDropped rows were shed whole to the size bound.
	RowsDropped int
	// Size is proto.Size of the column as trimmed.
	Size int
}

// TrimColumn makes col, in place, fit in budget encoded bytes and its rows'
// evidence fit in api.MaxReportEvidenceBytes, the way a Reporter does
// before it sends a column (exported so that load benchmarks build the
// reports a reporter would).
//
// A column too big for one report cannot be split across reports (the
// cluster deduplicates by reporter and column, so a second part would be
// taken for a duplicate), and the leader has no use for more evidence than
// a committed column carries. So the column sheds evidence from its
// lightest rows, where it matters least to a detector looking for hot
// routes: first the top keys and operation samples of rows in increasing
// weighted load (a row that loses top keys is marked top_k_degraded), then,
// if the size bound still is not met, whole rows in the same order. Rows
// keep their route-id order. The heaviest rows — the only ones that can be
// hot — are the last to lose anything.
func TrimColumn(col *api.ReportColumn, budget int) Trimmed {
	return trimColumn(col, budget, api.MaxReportEvidenceBytes)
}

// trimColumn is TrimColumn with the evidence bound as a parameter.
//
// It sizes each row once, its evidence apart from the rest (a row's
// encoded size is the sum of its fields'), and keeps the sizes up to date
// as it sheds: a busy node's column is 10,000 rows of 40 keys, trimmed
// every step.
func trimColumn(col *api.ReportColumn, budget, evidenceBudget int) Trimmed {
	rows := col.Rows
	col.Rows = nil
	size := proto.Size(col)
	col.Rows = rows
	rowSize := make([]int, len(rows)) // each row's encoding, evidence included
	ev := make([]int, len(rows))      // each row's evidence
	evidence := 0
	only := new(api.ReportRow)
	for i, r := range rows {
		only.TopKeys, only.Samples = r.TopKeys, r.Samples
		ev[i] = proto.Size(only)
		r.TopKeys, r.Samples = nil, nil
		rowSize[i] = proto.Size(r) + ev[i]
		r.TopKeys, r.Samples = only.TopKeys, only.Samples
		size += fieldSize(columnRowsField, rowSize[i])
		evidence += ev[i]
	}
	t := Trimmed{Size: size}
	if size <= budget && evidence <= evidenceBudget {
		return t
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	load := func(r *api.ReportRow) uint64 {
		return saturate.Add(saturate.Mul(r.Writes, uint64(col.WriteWeight)), saturate.Mul(r.Reads, uint64(col.ReadWeight)))
	}
	slices.SortStableFunc(order, func(a, b int) int {
		la, lb := load(rows[a]), load(rows[b])
		switch {
		case la < lb:
			return -1
		case la > lb:
			return 1
		}
		return 0
	})
	for _, i := range order {
		if size <= budget && evidence <= evidenceBudget {
			break
		}
		r, e := rows[i], ev[i]
		if e == 0 {
			continue
		}
		if evidence > evidenceBudget {
			t.EvidenceCapped++
		} else {
			t.EvidenceStripped++
		}
		after := rowSize[i] - e
		if len(r.TopKeys) > 0 {
			if !r.TopKDegraded {
				after += degradedFieldSize
			}
			r.TopKeys, r.TopKDegraded = nil, true
		}
		r.Samples = nil
		size -= fieldSize(columnRowsField, rowSize[i]) - fieldSize(columnRowsField, after)
		rowSize[i], evidence = after, evidence-e
	}
	drop := make([]bool, len(rows))
	for _, i := range order {
		if size <= budget {
			break
		}
		size -= fieldSize(columnRowsField, rowSize[i])
		drop[i] = true
		t.RowsDropped++
	}
	if t.RowsDropped > 0 {
		kept := rows[:0]
		for i, r := range rows {
			if !drop[i] {
				kept = append(kept, r)
			}
		}
		col.Rows = kept
	}
	t.Size = size
	return t
}

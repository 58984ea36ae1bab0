package fsm

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// evidenceRows are n hot rows of routes 1..n, each with 200 sampled keys
// of 1 KiB: about 200 KiB of evidence a row.
func evidenceRows(n int) []*api.ColumnRow {
	var rows []*api.ColumnRow
	for id := range uint64(n) {
		r := hotRow(id+1, "k")
		for j := range 200 {
			r.Samples = append(r.Samples, &api.WeightedKey{Key: fmt.Appendf(nil, "%04d%01020d", j, 0), Weight: 1})
		}
		rows = append(rows, r)
	}
	return rows
}

func evidenceBytes(rows []*api.ColumnRow) int {
	n := 0
	for _, r := range rows {
		n += proto.Size(r)
	}
	return n
}

// bounded_evidence: at version 3 a column listing route_loads holds at
// most MaxColumnEvidenceBytes of rows; one byte more is refused, naming the
// row that passes the limit and the feature, and nothing applies. A column
// without route_loads (assembled before the version rose) is not held to it.
func TestColumnEvidenceBytesCap(t *testing.T) {
	splits := [][]byte{[]byte("b"), []byte("c"), []byte("d")}
	rows := evidenceRows(3)
	if n := evidenceBytes(rows); n <= api.MaxColumnEvidenceBytes || evidenceBytes(rows[:2]) > api.MaxColumnEvidenceBytes {
		t.Fatalf("test rows: %d bytes (two rows %d), want three over the cap of %d and two under", n, evidenceBytes(rows[:2]), api.MaxColumnEvidenceBytes)
	}
	var loads []api.RouteLoad
	for _, r := range rows {
		loads = append(loads, loadOf(r))
	}
	loads = append(loads, api.RouteLoad{RouteID: 4, Writes: 1})

	h := bootstrappedAt(t, clusterversion.Version3, splits, hotConfig())
	before := h.state()
	r := h.run(loadsColumn(1000, 2000, loads, rows...))
	wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
	if !strings.Contains(r.Message, "rows[2]: the rows' evidence passes") || !strings.Contains(r.Message, "bounded_evidence") {
		t.Fatalf("message %q", r.Message)
	}
	assertUnchanged(t, before, h.state())

	// Within the cap, the same column applies.
	wantCode(t, h.run(loadsColumn(1000, 2000, loads, rows[:2]...)), api.ResultCode_RESULT_CODE_OK)

	// Without route_loads, the cap does not apply.
	h = bootstrappedAt(t, clusterversion.Version3, splits, hotConfig())
	wantCode(t, h.run(column(1000, 2000, rows...)), api.ResultCode_RESULT_CODE_OK)
	// Nor below version 3.
	h = bootstrappedAt(t, clusterversion.Version2, splits, hotConfig())
	wantCode(t, h.run(column(1000, 2000, rows...)), api.ResultCode_RESULT_CODE_OK)
}

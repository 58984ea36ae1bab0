package heatmap

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// checkInvariants verifies what every history must satisfy.
func checkInvariants(t *rapid.T, h *History) {
	if h.Columns() > MaxColumns || h.MarkCount() > MaxMarks {
		t.Fatalf("%d columns, %d marks", h.Columns(), h.MarkCount())
	}
	var prevEnd uint64
	first := true
	h.ascend(func(c *column, level int) {
		if len(h.levels[level]) > LevelColumns {
			t.Fatalf("level %d holds %d", level, len(h.levels[level]))
		}
		if c.lay.bands() > MaxBands || len(c.vals) != metrics*c.lay.bands() {
			t.Fatalf("column with %d bands, %d values", c.lay.bands(), len(c.vals))
		}
		for i, b := range c.lay.bounds {
			if len(b) == 0 || len(b) > MaxBoundaryLen || i > 0 && b <= c.lay.bounds[i-1] {
				t.Fatalf("bounds %q", c.lay.bounds)
			}
		}
		if c.startMs >= c.endMs || c.coveredMs == 0 || c.coveredMs > c.endMs-c.startMs || !first && c.startMs < prevEnd {
			t.Fatalf("column [%d, %d) covering %d after %d", c.startMs, c.endMs, c.coveredMs, prevEnd)
		}
		first, prevEnd = false, c.endMs
	})
	from, hasColumns := h.oldestStartMs()
	var prev uint64
	h.marks.ascend(func(m Mark) {
		if m.AtHLC < prev || hasColumns && m.AtMs() < from {
			t.Fatalf("mark at %d after %d, oldest column at %d ms", m.AtHLC, prev, from)
		}
		prev = m.AtHLC
	})
}

func TestPropertyBoundsHoldAndTotalsAddUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := drawScenario(t)
		st := startScenario(t, sc)
		st.run(t, sc.ops, false)
		checkInvariants(t, st.h)
		// 15·LevelColumns committed columns fit before anything is
		// dropped; until then downsampling preserves every total.
		committed := uint64(0)
		st.h.ascend(func(_ *column, level int) { committed += 1 << level })
		if committed < 15*LevelColumns && st.h.totals() != st.totals {
			t.Fatalf("history totals %v, inputs %v", st.h.totals(), st.totals)
		}
	})
}

func TestPropertyLoadOrderIrrelevant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := drawScenario(t)
		a, b := startScenario(t, sc), startScenario(t, sc)
		a.run(t, sc.ops, false)
		b.run(t, sc.ops, true)
		if !proto.Equal(a.h.ToProto(), b.h.ToProto()) {
			t.Fatal("permuting each column's loads changed the history")
		}
	})
}

func TestPropertyProtoRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := drawScenario(t)
		st := startScenario(t, sc)
		st.run(t, sc.ops, false)
		p := st.h.ToProto()
		back, err := FromProto(p)
		if err != nil {
			t.Fatalf("FromProto(ToProto): %v", err)
		}
		checkInvariants(t, back)
		q := back.ToProto()
		b1, _ := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		b2, _ := proto.MarshalOptions{Deterministic: true}.Marshal(q)
		if !bytes.Equal(b1, b2) {
			t.Fatal("the round trip changed the encoding")
		}
		if back.Size() <= 0 {
			t.Fatal("no size")
		}
	})
}

// A node restored from a snapshot must go on exactly like one that never
// stopped: nothing but the canonical content may steer the history.
func TestPropertyRestoreThenContinue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := drawScenario(t)
		cut := rapid.IntRange(0, len(sc.ops)).Draw(t, "cut")
		live := startScenario(t, sc)
		live.run(t, sc.ops, false)

		restored := startScenario(t, sc)
		restored.run(t, sc.ops[:cut], false)
		h, err := FromProto(restored.h.ToProto())
		if err != nil {
			t.Fatal(err)
		}
		restored.h = h
		restored.run(t, sc.ops[cut:], false)
		if !proto.Equal(live.h.ToProto(), restored.h.ToProto()) {
			t.Fatal("a restored history went on differently")
		}
	})
}

func TestPropertyQueryAnswersTheColumns(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := drawScenario(t)
		st := startScenario(t, sc)
		st.run(t, sc.ops, false)
		metric := Metric(rapid.IntRange(0, metrics-1).Draw(t, "metric"))
		maxCells := rapid.SampledFrom([]int{0, 1, 7, 300}).Draw(t, "max_cells")
		m, err := st.h.Query(Query{ToMs: ^uint64(0), Metric: metric, MaxCells: maxCells})
		if err != nil {
			t.Fatal(err)
		}
		checkMatrix(t, m, maxCells)
		var want, got uint64
		st.h.ascend(func(c *column, _ int) {
			for _, v := range c.values(metric) {
				want += v
			}
		})
		var committed uint64
		for _, c := range m.Cells {
			committed += c.Columns
			for _, v := range c.Values {
				got += v
			}
		}
		if got != want {
			t.Fatalf("the whole range answers %d, the columns hold %d", got, want)
		}
		var kept uint64
		st.h.ascend(func(_ *column, level int) { kept += 1 << level })
		if committed != kept {
			t.Fatalf("cells sum %d columns, the history %d", committed, kept)
		}

		// A key range answers the bands that overlap it, cut at its edges.
		start := drawKey(t, "start")
		end := drawKey(t, "end")
		if bytes.Compare(start, end) >= 0 {
			end = nil
		}
		r, err := st.h.Query(Query{ToMs: ^uint64(0), Start: start, End: end, Metric: metric})
		if err != nil {
			t.Fatal(err)
		}
		checkMatrix(t, r, 0)
		if len(r.Keys) == 0 || !bytes.Equal(r.Keys[0], start) {
			t.Fatalf("rows start at %q, want %q", r.Keys, start)
		}
		for _, k := range r.Keys[1:] {
			if bytes.Compare(k, start) <= 0 || len(end) > 0 && bytes.Compare(k, end) >= 0 {
				t.Fatalf("row key %q outside [%q, %q)", k, start, end)
			}
		}
	})
}

func checkMatrix(t *rapid.T, m Matrix, maxCells int) {
	if maxCells == 0 {
		maxCells = MaxCells
	}
	if len(m.Cells) > maxCells || len(m.Keys) > MaxBands {
		t.Fatalf("%d cells × %d rows", len(m.Cells), len(m.Keys))
	}
	for i := 1; i < len(m.Keys); i++ {
		if bytes.Compare(m.Keys[i-1], m.Keys[i]) >= 0 {
			t.Fatalf("rows not ascending: %q", m.Keys)
		}
	}
	for i, k := range m.Keys {
		if r, ok := m.Row(k); !ok || r != i {
			t.Fatalf("Row(%q) = %d, %v, want %d", k, r, ok, i)
		}
	}
	for i, c := range m.Cells {
		if len(c.Rows) != len(c.Values) || len(c.Rows) == 0 || c.Rows[0] != 0 ||
			!slices.IsSorted(c.Rows) || slices.Compact(slices.Clone(c.Rows)) == nil || int(c.Rows[len(c.Rows)-1]) >= len(m.Keys) {
			t.Fatalf("cell %d rows %v of %d", i, c.Rows, len(m.Keys))
		}
		for j := 1; j < len(c.Rows); j++ {
			if c.Rows[j] <= c.Rows[j-1] {
				t.Fatalf("cell %d rows %v", i, c.Rows)
			}
		}
		if i > 0 && c.StartMs < m.Cells[i-1].EndMs {
			t.Fatalf("cells overlap in time")
		}
	}
}

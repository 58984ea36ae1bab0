package heatmap

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// validProto is a small canonical history: two levels, a shared layout,
// marks.
func validProto(t tb) *api.HeatmapHistory {
	t.Helper()
	cat := newCatalog(t, "b", "d")
	h := addSteps(t, New(), LevelColumns+1, 1000, 1000, ColumnInput{Catalog: cat, Weights: unitWeights})
	var err error
	if h, err = h.AddMark(split(5000, 0, "c", "c\x00")); err != nil {
		t.Fatal(err)
	}
	return h.ToProto()
}

func TestFromProtoRefusals(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *api.HeatmapHistory)
		want   string
	}{
		{"format", func(p *api.HeatmapHistory) { p.FormatVersion = 2 }, "format_version: 2"},
		{"empty boundary", func(p *api.HeatmapHistory) { p.Boundaries[0] = nil }, "boundaries[0]: empty"},
		{"long boundary", func(p *api.HeatmapHistory) { p.Boundaries[1] = []byte(strings.Repeat("x", 65)) }, "boundaries[1]: 65 bytes"},
		{"unsorted boundaries", func(p *api.HeatmapHistory) { p.Boundaries[0], p.Boundaries[1] = p.Boundaries[1], p.Boundaries[0] }, "boundaries[1]: not above"},
		{"unused boundary", func(p *api.HeatmapHistory) { p.Boundaries = append(p.Boundaries, []byte("z")) }, "boundaries[2]: used by no column"},
		{"too many levels", func(p *api.HeatmapHistory) {
			for range Levels {
				p.Levels = append(p.Levels, p.Levels[1])
			}
		}, "levels: 6 above 4"},
		{"empty last level", func(p *api.HeatmapHistory) { p.Levels = append(p.Levels, &api.HeatmapLevel{}) }, "levels[2]: empty last level"},
		{"level too long", func(p *api.HeatmapHistory) {
			p.Levels[0].Columns = append(p.Levels[0].Columns, p.Levels[0].Columns[:2]...)
		}, "levels[0].columns: 257 above 256"},
		{"empty span", func(p *api.HeatmapHistory) { p.Levels[0].Columns[3].EndMs = p.Levels[0].Columns[3].StartMs }, "levels[0].columns[3]: start_ms"},
		{"covered beyond span", func(p *api.HeatmapHistory) { p.Levels[0].Columns[3].CoveredMs = 1001 }, "levels[0].columns[3].covered_ms: 1001"},
		{"nothing covered", func(p *api.HeatmapHistory) { p.Levels[1].Columns[0].CoveredMs = 0 }, "levels[1].columns[0].covered_ms: 0"},
		{"overlapping columns", func(p *api.HeatmapHistory) {
			c := p.Levels[0].Columns[4]
			c.StartMs, c.EndMs = c.StartMs-500, c.EndMs-500
		}, "levels[0].columns[4]: start_ms"},
		{"levels out of order", func(p *api.HeatmapHistory) {
			c := p.Levels[1].Columns[0]
			c.StartMs, c.EndMs = c.StartMs+1_000_000, c.EndMs+1_000_000
		}, "levels[0].columns[0]: start_ms"},
		{"shared layout on a first column", func(p *api.HeatmapHistory) {
			p.Levels[0].Columns[0].SameBoundaries = true
			p.Levels[0].Columns[0].BoundaryDeltas = nil
		}, "levels[0].columns[0].same_boundaries"},
		{"shared layout with deltas", func(p *api.HeatmapHistory) { p.Levels[0].Columns[1].BoundaryDeltas = []uint32{0} }, "levels[0].columns[1].boundary_deltas: 1 deltas"},
		{"repeated layout not marked shared", func(p *api.HeatmapHistory) {
			p.Levels[0].Columns[1].SameBoundaries = false
			p.Levels[0].Columns[1].BoundaryDeltas = []uint32{0, 1}
		}, "levels[0].columns[1].boundary_deltas: the boundaries of the column before it"},
		{"zero delta", func(p *api.HeatmapHistory) { p.Levels[0].Columns[0].BoundaryDeltas = []uint32{0, 0} }, "boundary_deltas[1]: 0"},
		{"delta beyond", func(p *api.HeatmapHistory) { p.Levels[0].Columns[0].BoundaryDeltas = []uint32{0, 7} }, "boundary_deltas[1]: index 7 beyond"},
		{"huge delta", func(p *api.HeatmapHistory) { p.Levels[0].Columns[0].BoundaryDeltas = []uint32{1, 1<<32 - 1} }, "boundary_deltas[1]"},
		{"too many boundaries", func(p *api.HeatmapHistory) { p.Levels[0].Columns[0].BoundaryDeltas = make([]uint32, MaxBands) }, "1024 boundaries above 1023"},
		{"values short", func(p *api.HeatmapHistory) { p.Levels[0].Columns[2].Writes = p.Levels[0].Columns[2].Writes[:2] }, "levels[0].columns[2].writes: 2 values for 3 bands"},
		{"too many marks", func(p *api.HeatmapHistory) {
			for len(p.Marks) <= MaxMarks {
				p.Marks = append(p.Marks, p.Marks[0])
			}
		}, "marks: 4097 above 4096"},
		{"mark kind", func(p *api.HeatmapHistory) { p.Marks[0].Kind = 9 }, "marks[0].kind"},
		{"mark key lengths", func(p *api.HeatmapHistory) { p.Marks[0].KeyLengths = p.Marks[0].KeyLengths[:1] }, "marks[0].key_lengths: 1 for 2 keys"},
		{"mark length mismatch", func(p *api.HeatmapHistory) { p.Marks[0].KeyLengths[0] = 9 }, "marks[0].key_lengths[0]: 9"},
		{"mark key too long", func(p *api.HeatmapHistory) {
			p.Marks[0].Keys[0] = []byte(strings.Repeat("c", MaxMarkKeyLen+1))
			p.Marks[0].KeyLengths[0] = MaxMarkKeyLen + 1
		}, "marks[0].keys[0]: 257 bytes"},
		{"mark keys unordered", func(p *api.HeatmapHistory) {
			p.Marks[0].Keys[0], p.Marks[0].Keys[1] = p.Marks[0].Keys[1], p.Marks[0].Keys[0]
			p.Marks[0].KeyLengths[0], p.Marks[0].KeyLengths[1] = 2, 1
		}, "marks[0].keys:"},
		{"mark before the columns", func(p *api.HeatmapHistory) { p.Marks[0].AtHlc = hlc.Make(999, 0) }, "marks[0].at_hlc: 999 ms"},
		{"marks out of order", func(p *api.HeatmapHistory) {
			m := proto.Clone(p.Marks[0]).(*api.HeatmapMark)
			m.AtHlc--
			p.Marks = append(p.Marks, m)
		}, "marks[1].at_hlc"},
	}
	for _, tc := range tests {
		p := validProto(t)
		if _, err := FromProto(p); err != nil {
			t.Fatalf("the valid history: %v", err)
		}
		tc.mutate(p)
		_, err := FromProto(p)
		if !errors.Is(err, ErrInvalidHistory) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestEmptyHistoryProto(t *testing.T) {
	p := New().ToProto()
	if len(p.GetLevels()) != 0 || len(p.GetBoundaries()) != 0 || p.GetFormatVersion() != FormatVersion {
		t.Fatalf("empty history: %v", p)
	}
	h, err := FromProto(p)
	if err != nil || h.Columns() != 0 {
		t.Fatalf("FromProto(empty) = %v", err)
	}
}

// FuzzFromProto: snapshot bytes are outside bytes. FromProto never panics,
// and whatever it accepts encodes back to the same message. The seed is
// small (two levels, a split layout, a two-key mark): a seed of hundreds
// of columns slows the fuzzer to a few executions a second.
func FuzzFromProto(f *testing.F) {
	seed := history3Proto(f)
	if _, err := FromProto(seed); err != nil {
		f.Fatalf("the seed: %v", err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p api.HeatmapHistory
		if api.UnmarshalStrict(b, &p) != nil {
			return
		}
		h, err := FromProto(&p)
		if err != nil {
			return
		}
		if !proto.Equal(h.ToProto(), &p) {
			t.Fatal("an accepted history does not encode back to its message")
		}
		if _, err := h.Query(Query{ToMs: ^uint64(0)}); err != nil {
			t.Fatalf("query of an accepted history: %v", err)
		}
	})
}

func history3Proto(t tb) *api.HeatmapHistory {
	cat := newCatalog(t, "b", "d")
	h := addSteps(t, New(), 3, 1000, 1000, ColumnInput{Catalog: cat, Weights: unitWeights})
	cat2, _, err := cat.Split(routeIDs(cat)[1], []byte("c"), hlc.Make(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	h = addSteps(t, h, 1, 4000, 1000, ColumnInput{Catalog: cat2, Weights: unitWeights})
	l := h.levels[0]
	h.levels[1] = []*column{mergeColumns(l[0], l[1])}
	h.levels[0] = l[2:]
	if h, err = h.AddMark(split(2500, 0, "c", "c\x00")); err != nil {
		t.Fatal(err)
	}
	return h.ToProto()
}

package heatmap

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

func split(atMs uint64, origin api.SplitOrigin, keys ...string) Mark {
	m := Mark{AtHLC: hlc.Make(atMs, 0), Kind: splitKind, SplitOrigin: origin}
	for _, k := range keys {
		m.Keys = append(m.Keys, []byte(k))
	}
	return m
}

func TestMarkRefusals(t *testing.T) {
	merge := api.HeatmapMarkKind_HEATMAP_MARK_KIND_MERGE
	tests := []struct {
		name string
		m    Mark
		want string
	}{
		{"no kind", Mark{Keys: [][]byte{[]byte("a")}}, "kind"},
		{"unknown split origin", Mark{Kind: splitKind, SplitOrigin: 99, Keys: [][]byte{[]byte("a")}}, "split_origin"},
		{"merge origin on a split", Mark{Kind: splitKind, MergeOrigin: api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_MANUAL, Keys: [][]byte{[]byte("a")}}, "merge_origin"},
		{"merge without origin", Mark{Kind: merge, Keys: [][]byte{[]byte("a")}}, "merge_origin"},
		{"split origin on a merge", Mark{Kind: merge, MergeOrigin: api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_MANUAL,
			SplitOrigin: api.SplitOrigin_SPLIT_ORIGIN_MANUAL, Keys: [][]byte{[]byte("a")}}, "split_origin"},
		{"no key", Mark{Kind: splitKind}, "keys: 0"},
		{"three keys", split(1, 0, "a", "b", "c"), "keys: 3"},
		{"empty key", split(1, 0, ""), "keys[0]: empty"},
		{"keys not ascending", split(1, 0, "b", "a"), "is not below"},
		{"key too long", split(1, 0, strings.Repeat("k", 4098)), "keys[0]: 4098 bytes"},
	}
	for _, tc := range tests {
		_, err := New().AddMark(tc.m)
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	h, err := New().AddMark(split(10, 0, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.AddMark(split(9, 0, "a")); !errors.Is(err, ErrStale) {
		t.Errorf("an older mark: %v, want ErrStale", err)
	}
}

func TestMarksKeepCutKeysAndLengths(t *testing.T) {
	long := strings.Repeat("h", 300)
	h, err := New().AddMark(split(5, api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, long, long+"\x00"))
	if err != nil {
		t.Fatal(err)
	}
	got := h.Marks(0, 10, nil, nil)
	if len(got) != 1 {
		t.Fatalf("%d marks", len(got))
	}
	m := got[0]
	if len(m.Keys) != 2 || !bytes.Equal(m.Keys[0], []byte(long[:MaxMarkKeyLen])) || !bytes.Equal(m.Keys[1], m.Keys[0]) ||
		m.KeyLens[0] != 300 || m.KeyLens[1] != 301 {
		t.Fatalf("kept %d keys, lengths %v", len(m.Keys), m.KeyLens)
	}
	if _, err := FromProto(h.ToProto()); err != nil {
		t.Fatalf("a kept two-key isolation of long keys does not decode: %v", err)
	}
}

func TestMarksBoundedByCountAndByTheColumns(t *testing.T) {
	h := New()
	var err error
	for i := range MaxMarks + 10 {
		if h, err = h.AddMark(split(uint64(1000+i), api.SplitOrigin_SPLIT_ORIGIN_BALANCE, "k")); err != nil {
			t.Fatal(err)
		}
	}
	all := h.Marks(0, ^uint64(0), nil, nil)
	if len(all) != MaxMarks || all[0].AtMs() != 1010 || all[len(all)-1].AtMs() != uint64(1000+MaxMarks+9) {
		t.Fatalf("kept %d marks from %d", len(all), all[0].AtMs())
	}
	// A column starting at 3000 ms: older marks are outside the picture.
	cat := newCatalog(t, "m")
	h = mustAdd(t, h, ColumnInput{WindowStartMs: 3000, AtMs: 4000, Catalog: cat, Weights: unitWeights})
	if got := h.Marks(0, ^uint64(0), nil, nil); len(got) != 1000+MaxMarks+10-3000 || got[0].AtMs() != 3000 {
		t.Fatalf("after the column: %d marks from %d ms", len(got), got[0].AtMs())
	}
	// ... and one arriving older than the oldest column is not kept.
	h2, err := New().AddColumn(ColumnInput{WindowStartMs: 3000, AtMs: 4000, Catalog: cat, Weights: unitWeights})
	if err != nil {
		t.Fatal(err)
	}
	if h2, err = h2.AddMark(split(2999, 0, "k")); err != nil || h2.MarkCount() != 0 {
		t.Fatalf("a mark before the oldest column: %v, %d kept", err, h2.MarkCount())
	}
}

func TestMarksQueryByTimeAndKey(t *testing.T) {
	h := New()
	for _, m := range []Mark{split(10, 0, "a"), split(20, 0, "m", "m\x00"), split(30, 0, "z")} {
		var err error
		if h, err = h.AddMark(m); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		from, to   uint64
		start, end string
		want       []uint64
	}{
		{0, 100, "", "", []uint64{10, 20, 30}},
		{11, 30, "", "", []uint64{20, 30}},
		{0, 100, "b", "y", []uint64{20}},
		{0, 100, "m\x00", "n", []uint64{20}}, // one of its keys is inside
		{0, 100, "n", "", []uint64{30}},
	}
	for _, tc := range tests {
		var got []uint64
		for _, m := range h.Marks(tc.from, tc.to, []byte(tc.start), []byte(tc.end)) {
			got = append(got, m.AtMs())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("[%d, %d] [%q, %q): %v, want %v", tc.from, tc.to, tc.start, tc.end, got, tc.want)
		}
	}
}

package webui

import (
	"bytes"
	"errors"
	"net/url"
	"strconv"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/heatmap"
)

func TestParseHeatmapParams(t *testing.T) {
	p, err := ParseHeatmapParams(`from=1&to=2&start=user%3A%5Cx00&end=user%3B&metric=writes&cells=640`)
	if err != nil {
		t.Fatal(err)
	}
	want := HeatmapParams{FromMs: 1, ToMs: 2, HasFrom: true, HasTo: true, Start: []byte("user:\x00"), End: []byte("user;"),
		Metric: heatmap.MetricWrites, Cells: 640}
	if p.FromMs != want.FromMs || p.ToMs != want.ToMs || !p.HasFrom || !p.HasTo || !bytes.Equal(p.Start, want.Start) ||
		!bytes.Equal(p.End, want.End) || p.Metric != want.Metric || p.Cells != want.Cells {
		t.Fatalf("%+v, want %+v", p, want)
	}
	p, err = ParseHeatmapParams("")
	if err != nil || p.HasFrom || p.HasTo || p.Start != nil || p.End != nil || p.Metric != heatmap.MetricWeighted || p.Cells != 0 {
		t.Fatalf("defaults: %+v, %v", p, err)
	}
	var pe *ParamError
	if _, err := ParseHeatmapParams("end=a&start=b&metric=no"); !errors.As(err, &pe) || pe.Param != "end" {
		t.Fatalf("several bad parameters: %v, want the first in order of checking (end)", err)
	}
}

// encodeHeatmapParams writes p as a query the parser reads back.
func encodeHeatmapParams(p HeatmapParams) string {
	v := url.Values{}
	if p.HasFrom {
		v.Set("from", strconv.FormatUint(p.FromMs, 10))
	}
	if p.HasTo {
		v.Set("to", strconv.FormatUint(p.ToMs, 10))
	}
	if p.Start != nil {
		v.Set("start", catalog.EscapeKey(p.Start))
	}
	if p.End != nil {
		v.Set("end", catalog.EscapeKey(p.End))
	}
	v.Set("metric", p.Metric.String())
	if p.Cells != 0 {
		v.Set("cells", strconv.Itoa(p.Cells))
	}
	return v.Encode()
}

// FuzzParseParams: the API's query strings are outside input. The parsers
// never panic, refuse with a ParamError, and what they accept is in range
// and survives re-encoding.
func FuzzParseParams(f *testing.F) {
	for _, s := range []string{"", "from=1&to=2", "start=a%5Cx00&end=b", "metric=bytes&cells=1500", "route=7",
		"from=%zz", "a;b", "start=%5Cq", "metric=reads&metric=writes", "cells=-1", "end=&start="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var pe *ParamError
		p, err := ParseHeatmapParams(raw)
		if err != nil {
			if !errors.As(err, &pe) {
				t.Fatalf("heatmap %q: %v is not a ParamError", raw, err)
			}
		} else {
			if p.HasFrom && p.HasTo && p.FromMs > p.ToMs || len(p.End) > 0 && bytes.Compare(p.Start, p.End) >= 0 ||
				len(p.Start) > catalog.MaxBoundaryLen || p.Cells < 0 || p.Cells > heatmap.MaxCells {
				t.Fatalf("heatmap %q accepted out of range: %+v", raw, p)
			}
			q, err := ParseHeatmapParams(encodeHeatmapParams(p))
			if err != nil || q.FromMs != p.FromMs || q.ToMs != p.ToMs || q.HasFrom != p.HasFrom || q.HasTo != p.HasTo ||
				!bytes.Equal(q.Start, p.Start) || !bytes.Equal(q.End, p.End) || q.Metric != p.Metric || q.Cells != p.Cells {
				t.Fatalf("heatmap %q: re-encoded %+v reads back as %+v, %v", raw, p, q, err)
			}
		}
		if d, err := ParseDecisionsParams(raw); err != nil {
			if !errors.As(err, &pe) {
				t.Fatalf("decisions %q: %v is not a ParamError", raw, err)
			}
		} else if d.HasFrom && d.HasTo && d.FromMs > d.ToMs {
			t.Fatalf("decisions %q accepted %+v", raw, d)
		}
		if id, err := ParseExplainParams(raw); err != nil {
			if !errors.As(err, &pe) {
				t.Fatalf("explain %q: %v is not a ParamError", raw, err)
			}
		} else if id == 0 {
			t.Fatalf("explain %q accepted route 0", raw)
		}
	})
}

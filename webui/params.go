package webui

import (
	"bytes"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/heatmap"
)

// ParamError is a refused query parameter; the API answers it with 400
// and this message.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string {
	if e.Param == "" {
		return "query: " + e.Msg
	}
	return "parameter " + e.Param + ": " + e.Msg
}

func paramErr(param, format string, args ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// HeatmapParams are the parameters of GET /api/v1/heatmap.
type HeatmapParams struct {
	// FromMs and ToMs, milliseconds since the epoch, both included; absent
	// (Has* false) they default to the hour before the newest column.
	FromMs, ToMs   uint64
	HasFrom, HasTo bool
	// The key range [Start, End); an empty End is +inf.
	Start, End []byte
	Metric     heatmap.Metric
	// Cells bounds the time cells of the answer (0: heatmap.MaxCells).
	Cells int
}

// DecisionsParams are the parameters of GET /api/v1/decisions.
type DecisionsParams struct {
	FromMs, ToMs   uint64
	HasFrom, HasTo bool
}

// ParseHeatmapParams reads the raw query of GET /api/v1/heatmap: from and
// to in decimal milliseconds, start and end in the escaped key format
// (catalog.EscapeKey) URL-escaped, metric one of weighted, reads, writes,
// bytes (default weighted), cells 1..heatmap.MaxCells. Unknown or repeated
// parameters are refused, so a typo is not silently ignored.
func ParseHeatmapParams(rawQuery string) (HeatmapParams, error) {
	v, err := values(rawQuery, "from", "to", "start", "end", "metric", "cells")
	if err != nil {
		return HeatmapParams{}, err
	}
	var p HeatmapParams
	if p.FromMs, p.HasFrom, err = msParam(v, "from"); err != nil {
		return p, err
	}
	if p.ToMs, p.HasTo, err = msParam(v, "to"); err != nil {
		return p, err
	}
	if p.HasFrom && p.HasTo && p.FromMs > p.ToMs {
		return p, paramErr("from", "%d is after to %d", p.FromMs, p.ToMs)
	}
	if p.Start, err = keyParam(v, "start"); err != nil {
		return p, err
	}
	if p.End, err = keyParam(v, "end"); err != nil {
		return p, err
	}
	if len(p.End) > 0 && bytes.Compare(p.Start, p.End) >= 0 {
		return p, paramErr("end", "%s is not above start %s", catalog.FormatKey(p.End), catalog.FormatKey(p.Start))
	}
	if s, ok := v["metric"]; ok {
		if p.Metric, err = heatmap.ParseMetric(s); err != nil {
			return p, paramErr("metric", "%q is not one of weighted, reads, writes, bytes", s)
		}
	}
	if s, ok := v["cells"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > heatmap.MaxCells {
			return p, paramErr("cells", "%q is not a number in [1, %d]", s, heatmap.MaxCells)
		}
		p.Cells = n
	}
	return p, nil
}

// ParseDecisionsParams reads the raw query of GET /api/v1/decisions: from
// and to in decimal milliseconds (both included, both optional).
func ParseDecisionsParams(rawQuery string) (DecisionsParams, error) {
	v, err := values(rawQuery, "from", "to")
	if err != nil {
		return DecisionsParams{}, err
	}
	var p DecisionsParams
	if p.FromMs, p.HasFrom, err = msParam(v, "from"); err != nil {
		return p, err
	}
	if p.ToMs, p.HasTo, err = msParam(v, "to"); err != nil {
		return p, err
	}
	if p.HasFrom && p.HasTo && p.FromMs > p.ToMs {
		return p, paramErr("from", "%d is after to %d", p.FromMs, p.ToMs)
	}
	return p, nil
}

// ParseExplainParams reads the raw query of GET /api/v1/explain: route, a
// route id (required, decimal, not 0).
func ParseExplainParams(rawQuery string) (uint64, error) {
	v, err := values(rawQuery, "route")
	if err != nil {
		return 0, err
	}
	s, ok := v["route"]
	if !ok {
		return 0, paramErr("route", "required")
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, paramErr("route", "%q is not a route id (a decimal number above 0)", s)
	}
	return id, nil
}

// values parses a raw query, refusing malformed escapes, parameters not
// in allowed and repeated ones.
func values(rawQuery string, allowed ...string) (map[string]string, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, paramErr("", "%v", err)
	}
	out := make(map[string]string, len(q))
	// In name order, so the error for several bad parameters is always the
	// same one.
	for _, name := range slices.Sorted(maps.Keys(q)) {
		vs := q[name]
		switch {
		case !slices.Contains(allowed, name):
			return nil, paramErr(strconv.Quote(name), "unknown parameter (this endpoint takes %v)", allowed)
		case len(vs) > 1:
			return nil, paramErr(name, "given %d times", len(vs))
		}
		out[name] = vs[0]
	}
	return out, nil
}

func msParam(v map[string]string, name string) (uint64, bool, error) {
	s, ok := v[name]
	if !ok {
		return 0, false, nil
	}
	ms, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, paramErr(name, "%q is not milliseconds since the epoch (a decimal number)", s)
	}
	return ms, true, nil
}

func keyParam(v map[string]string, name string) ([]byte, error) {
	s, ok := v[name]
	if !ok {
		return nil, nil
	}
	k, err := catalog.UnescapeKey(s)
	if err != nil {
		return nil, paramErr(name, "%v", err)
	}
	if len(k) > catalog.MaxBoundaryLen {
		return nil, paramErr(name, "%d bytes; keys are at most %d", len(k), catalog.MaxBoundaryLen)
	}
	return k, nil
}

package webui

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/heatmap"
	"github.com/hotsplit/hotsplit/hlc"
)

// The JSON answers of the API. Keys are strings in the escaped key format
// (catalog.EscapeKey: printable ASCII, other bytes as \xNN); an empty end
// key means +inf. Times are milliseconds since the epoch; an HLC is a
// decimal string (it does not fit a JavaScript number). Enum values are
// their proto names without the enum's prefix.

// ReadInfo says where and at which point of the log an answer was read.
type ReadInfo struct {
	AppliedIndex   uint64 `json:"applied_index"`
	CatalogVersion uint64 `json:"catalog_version"`
	ServedBy       string `json:"served_by"`
}

// HeatmapAnswer is the answer of GET /api/v1/heatmap.
type HeatmapAnswer struct {
	Read   ReadInfo `json:"read"`
	NowMs  uint64   `json:"now_ms"`
	Metric string   `json:"metric"`
	// The time and key range answered (defaults filled in).
	FromMs uint64 `json:"from_ms"`
	ToMs   uint64 `json:"to_ms"`
	Start  string `json:"start"`
	End    string `json:"end"`
	// Step is the replicated step and a pending change: the page polls at
	// least once per step.
	Step Step `json:"step"`
	// History is what this node keeps, whatever was asked.
	History HistorySpan `json:"history"`
	// Keys[i] is where row i starts; rows are equally tall on the page.
	Keys []string `json:"keys"`
	// Layouts are the distinct ways the cells divide the rows into bands,
	// each a bitmap of the rows that start a band (layout.go: hexadecimal,
	// four rows a digit, row 0 first). Runs of cells share one (bands
	// follow route boundaries), and a layout is at most 256 digits, so the
	// band values are nearly all of a large answer.
	Layouts []string `json:"layouts"`
	Cells   []Cell   `json:"cells"`
	Marks   []Mark   `json:"marks"`
	// Routes are the live routes overlapping the key range, at most
	// MaxRoutes; RoutesOmitted counts them when there are more (the page
	// asks to zoom in).
	Routes        []Route `json:"routes"`
	RoutesOmitted int     `json:"routes_omitted"`
	Switch        Switch  `json:"switch"`
}

// MaxRoutes bounds the routes a heatmap answer lists.
const MaxRoutes = 1024

// Step is the replicated column step.
type Step struct {
	Ms       uint64 `json:"ms"`
	NextMs   uint64 `json:"next_ms,omitempty"`
	NextAtMs uint64 `json:"next_at_ms,omitempty"`
}

// HistorySpan describes the kept history: Enabled is false below cluster
// version 3 (no history is kept, the page says so).
type HistorySpan struct {
	Enabled bool `json:"enabled"`
	// Reason says why the history is not enabled.
	Reason  string `json:"reason,omitempty"`
	FromMs  uint64 `json:"from_ms"`
	ToMs    uint64 `json:"to_ms"`
	Columns int    `json:"columns"`
	Marks   int    `json:"marks"`
}

// Cell is one time cell divided into bands by Layouts[Layout]: with rows
// the rows that start a band there (HeatmapAnswer.Rows), band j covers
// rows [rows[j], rows[j+1]) (the last to the last row) and Values[j] is
// its total over CoveredMs; a rate per minute is Values[j]·60000/CoveredMs.
// Columns counts the committed columns summed in it.
type Cell struct {
	StartMs   uint64   `json:"start_ms"`
	EndMs     uint64   `json:"end_ms"`
	CoveredMs uint64   `json:"covered_ms"`
	Columns   uint64   `json:"columns"`
	Layout    int      `json:"layout"`
	Values    []uint64 `json:"values"`
}

// Rows returns the rows that start a band in cell i (its layout read
// back), nil when the answer has no such cell or layout.
func (a *HeatmapAnswer) Rows(i int) []uint32 {
	if i < 0 || i >= len(a.Cells) || a.Cells[i].Layout < 0 || a.Cells[i].Layout >= len(a.Layouts) {
		return nil
	}
	rows, err := layoutRows(a.Layouts[a.Cells[i].Layout])
	if err != nil {
		return nil
	}
	return rows
}

// Mark is a split or merge. Kind is "split" or "merge"; Origin a
// SplitOrigin name for splits (BALANCE, MANUAL, ISOLATION_COMPOUND, ...),
// MANUAL or AUTOMATIC for merges. Keys are cut at heatmap.MaxMarkKeyLen
// bytes (KeyLengths are the full lengths); Rows[i] is the row Keys[i]
// falls in, -1 outside the key range.
type Mark struct {
	AtMs       uint64   `json:"at_ms"`
	AtHLC      string   `json:"at_hlc"`
	Kind       string   `json:"kind"`
	Origin     string   `json:"origin"`
	Keys       []string `json:"keys"`
	KeyLengths []uint32 `json:"key_lengths"`
	Rows       []int    `json:"rows"`
	RouteID    uint64   `json:"route_id"`
	OpID       uint64   `json:"op_id,omitempty"`
}

// Route is a live route: its range and rows ([StartRow, EndRow) on the
// page) and what the detector holds about it.
type Route struct {
	RouteID         uint64 `json:"route_id"`
	Start           string `json:"start"`
	End             string `json:"end"`
	StartRow        int    `json:"start_row"`
	EndRow          int    `json:"end_row"`
	State           string `json:"state"`
	Tracked         bool   `json:"tracked"`
	Score           uint64 `json:"score"`
	ConsecutiveOver uint32 `json:"consecutive_over"`
	CooldownLeftMs  uint64 `json:"cooldown_left_ms"`
}

// Switch is the auto-split switch: the page's banner.
type Switch struct {
	Enabled     bool   `json:"enabled"`
	Actor       string `json:"actor"`
	Reason      string `json:"reason"`
	Note        string `json:"note,omitempty"`
	Source      string `json:"source"`
	ChangedAtMs uint64 `json:"changed_at_ms"`
}

// defaultSpanMs is the time range answered when from is not given: the
// hour before to.
const defaultSpanMs = 3_600_000

func readInfo(r *api.ReadInfo) ReadInfo {
	return ReadInfo{AppliedIndex: r.GetAppliedIndex(), CatalogVersion: r.GetCatalogVersion(), ServedBy: r.GetServedBy()}
}

func escape(k []byte) string { return catalog.EscapeKey(k) }

// enumName is an enum value's proto name without its prefix.
func enumName(s fmt.Stringer, prefix string) string { return strings.TrimPrefix(s.String(), prefix) }

func hlcString(h uint64) string { return strconv.FormatUint(h, 10) }

// buildHeatmap answers p from s.
func buildHeatmap(s *Snapshot, p HeatmapParams) (*HeatmapAnswer, error) {
	a := &HeatmapAnswer{Read: readInfo(s.Read), NowMs: s.NowMs, Metric: p.Metric.String(),
		Start: escape(p.Start), End: escape(p.End), Switch: switchOf(s.Switch),
		Step: Step{Ms: s.Config.GetStepMs(), NextMs: s.Config.GetNextStepMs(), NextAtMs: s.Config.GetNextStepAtMs()}}
	h := s.History
	a.History.Enabled = h != nil
	if h == nil {
		a.History.Reason = s.HistoryOff
		if a.History.Reason == "" {
			a.History.Reason = "no heat history is kept below cluster version 3"
		}
		h = heatmap.New()
	}
	var newest uint64
	if from, to, ok := h.Span(); ok {
		a.History.FromMs, a.History.ToMs, newest = from, to, to
	}
	a.History.Columns, a.History.Marks = h.Columns(), h.MarkCount()
	a.ToMs = p.ToMs
	if !p.HasTo {
		a.ToMs = max(newest, s.NowMs)
	}
	a.FromMs = p.FromMs
	if !p.HasFrom {
		a.FromMs = a.ToMs - min(a.ToMs, defaultSpanMs)
	}
	if a.FromMs > a.ToMs {
		return nil, paramErr("from", "%d is after to %d (the default)", a.FromMs, a.ToMs)
	}
	m, err := h.Query(heatmap.Query{FromMs: a.FromMs, ToMs: a.ToMs, Start: p.Start, End: p.End, Metric: p.Metric, MaxCells: p.Cells})
	if err != nil {
		return nil, err
	}
	a.Keys = make([]string, len(m.Keys))
	for i, k := range m.Keys {
		a.Keys[i] = escape(k)
	}
	a.Layouts = []string{}
	a.Cells = make([]Cell, len(m.Cells))
	var last []uint32
	for i, c := range m.Cells {
		// Only the previous layout is compared: cells share layouts in
		// runs (a layout changes when routes split or merge, or when the
		// cheapest bands to merge change), so this finds nearly every
		// repeat in one comparison per cell.
		if i == 0 || !slices.Equal(last, c.Rows) {
			a.Layouts = append(a.Layouts, layoutOf(c.Rows, len(m.Keys)))
			last = c.Rows
		}
		a.Cells[i] = Cell{StartMs: c.StartMs, EndMs: c.EndMs, CoveredMs: c.CoveredMs, Columns: c.Columns, Layout: len(a.Layouts) - 1, Values: c.Values}
	}
	a.Marks = []Mark{}
	for _, mk := range h.Marks(a.FromMs, a.ToMs, p.Start, p.End) {
		a.Marks = append(a.Marks, markOf(mk, &m))
	}
	a.Routes, a.RoutesOmitted = routesOf(s, p.Start, p.End, &m)
	return a, nil
}

func markOf(mk heatmap.Mark, m *heatmap.Matrix) Mark {
	out := Mark{AtMs: mk.AtMs(), AtHLC: hlcString(mk.AtHLC), RouteID: mk.RouteID, OpID: mk.OpID, KeyLengths: mk.KeyLens}
	if mk.Kind == api.HeatmapMarkKind_HEATMAP_MARK_KIND_MERGE {
		out.Kind, out.Origin = "merge", enumName(mk.MergeOrigin, "HEATMAP_MERGE_ORIGIN_")
	} else {
		out.Kind, out.Origin = "split", enumName(mk.SplitOrigin, "SPLIT_ORIGIN_")
	}
	for _, k := range mk.Keys {
		out.Keys = append(out.Keys, escape(k))
		row, ok := m.Row(k)
		if !ok {
			row = -1
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// routesOf lists the live routes overlapping [start, end) with their rows
// and detector state, or only counts them beyond MaxRoutes.
func routesOf(s *Snapshot, start, end []byte, m *heatmap.Matrix) ([]Route, int) {
	routes := []Route{}
	if s.Catalog == nil {
		return routes, 0
	}
	var in []*catalog.RouteDescriptor
	n := 0
	first := s.Catalog.Lookup(start)
	s.Catalog.AscendFrom(first.Start, func(r *catalog.RouteDescriptor) bool {
		if len(end) > 0 && bytes.Compare(r.Start, end) >= 0 {
			return false
		}
		n++
		if n <= MaxRoutes {
			in = append(in, r)
		}
		return true
	})
	if n > MaxRoutes {
		return routes, n
	}
	for _, r := range in {
		out := Route{RouteID: r.ID, Start: escape(r.Start), End: escape(r.End), State: enumName(api.RouteState(r.State), "ROUTE_STATE_"),
			StartRow: rowOf(m, r.Start), EndRow: len(m.Keys)}
		if !r.Unbounded() && (len(end) == 0 || bytes.Compare(r.End, end) < 0) {
			out.EndRow = rowOf(m, r.End)
		}
		if t := tracked(s.Tracked, r.ID); t != nil {
			out.Tracked, out.Score, out.ConsecutiveOver = true, t.GetLastScore(), t.GetConsecutiveOver()
			if c := t.GetCooldownUntilMs(); c > s.NowMs {
				out.CooldownLeftMs = c - s.NowMs
			}
		}
		routes = append(routes, out)
	}
	return routes, 0
}

// rowOf is the row a key starts in, 0 for keys before the range.
func rowOf(m *heatmap.Matrix, k []byte) int {
	if r, ok := m.Row(k); ok {
		return r
	}
	return 0
}

func tracked(ts []*api.TrackedRoute, id uint64) *api.TrackedRoute {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].GetRouteId() >= id })
	if i < len(ts) && ts[i].GetRouteId() == id {
		return ts[i]
	}
	return nil
}

func switchOf(s *api.AutoSplitSwitch) Switch {
	return Switch{Enabled: s.GetEnabled(), Actor: s.GetActor(), Reason: s.GetReason(), Note: s.GetNote(),
		Source: enumName(s.GetSource(), "SWITCH_SOURCE_"), ChangedAtMs: hlc.Physical(s.GetChangedAtHlc())}
}

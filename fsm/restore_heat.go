package fsm

import (
	"errors"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/heatmap"
)

// maxHeatBoundaries bounds the boundaries a snapshot's heat history may
// list: every column's own, none shared.
const maxHeatBoundaries = heatmap.MaxColumns * (heatmap.MaxBands - 1)

// readHeatPages reads the heat history's pages after the request frames
// into core.HeatHistory, as heat_history_pages announces them, and clears
// the announcement. Counts are trusted for one page only: the lists grow
// with the pages actually read.
func readHeatPages(fr *frameReader, core *api.StateSnapshot) error {
	h, pages := core.GetHeatHistory(), core.GetHeatHistoryPages()
	core.HeatHistoryPages = nil
	switch {
	case h == nil && pages == nil:
		return nil
	case h == nil:
		return errors.New("heat_history_pages without heat_history")
	case pages == nil:
		return errors.New("heat_history without heat_history_pages")
	case len(h.GetBoundaries()) > 0 || len(h.GetLevels()) > 0:
		return errors.New("core frame's heat_history holds paged lists")
	case len(pages.GetLevelColumns()) > heatmap.Levels:
		return fmt.Errorf("heat_history_pages.level_columns: %d levels above %d", len(pages.GetLevelColumns()), heatmap.Levels)
	case pages.GetBoundaries() > maxHeatBoundaries:
		return fmt.Errorf("heat_history_pages.boundaries: %d above %d", pages.GetBoundaries(), maxHeatBoundaries)
	}
	n := pages.GetBoundaries()
	bounds := make([][]byte, 0, min(n, heatBoundaryPage))
	for uint64(len(bounds)) < n {
		page := &api.HeatmapHistory{}
		if err := fr.read(page, "heat boundaries"); err != nil {
			return err
		}
		if err := pageSize(len(page.GetBoundaries()), heatBoundaryPage, n-uint64(len(bounds)), "heat boundaries", onlyField(page, "boundaries")); err != nil {
			return err
		}
		bounds = append(bounds, page.GetBoundaries()...)
	}
	levels := make([]*api.HeatmapLevel, len(pages.GetLevelColumns()))
	for i, c := range pages.GetLevelColumns() {
		if c > heatmap.LevelColumns {
			return fmt.Errorf("heat_history_pages.level_columns[%d]: %d above %d", i, c, heatmap.LevelColumns)
		}
		want := uint64(c)
		lv := &api.HeatmapLevel{Columns: make([]*api.HeatmapColumn, 0, min(want, heatColumnPage))}
		for uint64(len(lv.Columns)) < want {
			page := &api.HeatmapLevel{}
			if err := fr.read(page, "heat columns"); err != nil {
				return err
			}
			// HeatmapLevel has no field but columns.
			if err := pageSize(len(page.GetColumns()), heatColumnPage, want-uint64(len(lv.Columns)), "heat columns", false); err != nil {
				return err
			}
			lv.Columns = append(lv.Columns, page.GetColumns()...)
		}
		levels[i] = lv
	}
	h.Boundaries, h.Levels = bounds, levels
	return nil
}

// restoreHeat rebuilds the heat history, validated whole by heatmap: only
// at a cluster version with HeatHistory, never empty (a state keeps none
// until its first column or mark, and the hash tells the two apart).
func restoreHeat(s *State, p *api.StateSnapshot) error {
	if p.GetHeatHistoryPages() != nil {
		return errors.New("heat_history_pages outside a snapshot file's core frame")
	}
	hp := p.GetHeatHistory()
	if hp == nil {
		return nil
	}
	if !clusterversion.HeatHistory.EnabledAt(p.GetClusterVersion()) {
		return fmt.Errorf("heat_history at cluster version %d: it needs %d", p.GetClusterVersion(), clusterversion.HeatHistory.Version())
	}
	if len(hp.GetLevels()) == 0 && len(hp.GetMarks()) == 0 {
		return errors.New("heat_history: empty (absent until the first column or mark)")
	}
	h, err := heatmap.FromProto(hp)
	if err != nil {
		return fmt.Errorf("heat_history: %w", err)
	}
	s.heat = h
	return nil
}

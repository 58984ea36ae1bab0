package fsm

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// Snapshot file format, version 1 (raft's FileSnapshotStore adds a CRC):
//
//	magic     8 bytes "HSFSMSNP"
//	header    uvarints: format version, applied index, route count,
//	          tracked-route count, request-record count
//	core      one frame: StateSnapshot without routes, tracked routes and
//	          request records (its catalog holds only version and next id;
//	          no catalog = not bootstrapped)
//	routes    frames of CatalogSnapshot{routes}, routePage routes each (the
//	          last one holds the rest), in key order
//	tracked   frames of StateSnapshot{tracked}, trackedPage each
//	requests  frames of StateSnapshot{requests}, requestPage each, by seq
//	heat      when the core's heat_history is set (it then holds only
//	          format_version and marks, and heat_history_pages the counts):
//	          frames of HeatmapHistory{boundaries}, heatBoundaryPage each,
//	          then for each level from levels[0] frames of
//	          HeatmapLevel{columns}, heatColumnPage each
//	end of file
//
// A frame is a uvarint length (at most maxFrame) and a deterministic
// protobuf message. Paging keeps every message small: a million-route
// catalog is never one giant message, and a reader allocates at most one
// frame beyond what it has decoded, bounded by the bytes actually present.
const (
	snapshotMagic         = "HSFSMSNP"
	snapshotFormatVersion = 1
	routePage             = 4096
	trackedPage           = 1024
	requestPage           = 256
	// A heat column holds at most 1024 bands × 4 totals (≤ 10 bytes each)
	// and 1023 boundary deltas: about 46 KiB, so a page stays under 1 MiB.
	heatBoundaryPage = 4096
	heatColumnPage   = 16
	maxFrame         = 64 << 20
)

// fsmSnapshot is a captured immutable State; Persist may run concurrently
// with Apply.
type fsmSnapshot struct{ s *State }

// Persist writes the snapshot to sink and closes it (Cancel on error).
func (fs *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, fs.s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm snapshot at index %d: %w", fs.s.index, err)
	}
	return sink.Close()
}

// Release is a no-op: the State is garbage collected when unused.
func (fs *fsmSnapshot) Release() {}

// snapshotParts is what a snapshot file holds, in writing order.
type snapshotParts struct {
	index    uint64
	core     *api.StateSnapshot
	routes   int
	ascend   func(fn func(*api.RouteDescriptor) bool)
	tracked  []*api.TrackedRoute
	requests []*api.RequestRecord
	// heat is the whole heat history (nil: none); writeParts pages it.
	heat *api.HeatmapHistory
}

func writeSnapshot(w io.Writer, s *State) error {
	p := snapshotParts{index: s.index, core: s.coreProto(), requests: s.requests.records()}
	if s.heat != nil {
		p.heat = s.heat.ToProto()
	}
	if s.det != nil {
		p.tracked = trackedToProto(s.det.Tracked())
	}
	if s.cat != nil {
		p.routes = s.cat.Len()
		// Reuse one message per page slot: a million-route snapshot would
		// otherwise allocate a million messages for the collector to chase.
		slots := make([]api.RouteDescriptor, routePage)
		next := 0
		p.ascend = func(fn func(*api.RouteDescriptor) bool) {
			s.cat.Ascend(func(r *catalog.RouteDescriptor) bool {
				m := &slots[next%routePage]
				next++
				fillRoute(m, r)
				return fn(m)
			})
		}
	}
	return writeParts(w, p)
}

// writeParts writes the parts; it sets p.core's heat fields when p.heat
// is set.
func writeParts(w io.Writer, p snapshotParts) error {
	if h := p.heat; h != nil {
		pages := &api.HeatmapPages{Boundaries: uint64(len(h.GetBoundaries()))}
		for _, l := range h.GetLevels() {
			pages.LevelColumns = append(pages.LevelColumns, uint32(len(l.GetColumns())))
		}
		p.core.HeatHistory = &api.HeatmapHistory{FormatVersion: h.GetFormatVersion(), Marks: h.GetMarks()}
		p.core.HeatHistoryPages = pages
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	hdr := []byte(snapshotMagic)
	for _, v := range []uint64{snapshotFormatVersion, p.index, uint64(p.routes), uint64(len(p.tracked)), uint64(len(p.requests))} {
		hdr = binary.AppendUvarint(hdr, v)
	}
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	fw := frameWriter{w: bw}
	fw.write(p.core)
	if p.ascend != nil {
		page := make([]*api.RouteDescriptor, 0, routePage)
		p.ascend(func(r *api.RouteDescriptor) bool {
			page = append(page, r)
			if len(page) == routePage {
				fw.write(&api.CatalogSnapshot{Routes: page})
				page = page[:0]
			}
			return fw.err == nil
		})
		if len(page) > 0 {
			fw.write(&api.CatalogSnapshot{Routes: page})
		}
	}
	for i := 0; i < len(p.tracked); i += trackedPage {
		fw.write(&api.StateSnapshot{Tracked: p.tracked[i:min(i+trackedPage, len(p.tracked))]})
	}
	for i := 0; i < len(p.requests); i += requestPage {
		fw.write(&api.StateSnapshot{Requests: p.requests[i:min(i+requestPage, len(p.requests))]})
	}
	if h := p.heat; h != nil {
		b := h.GetBoundaries()
		for i := 0; i < len(b); i += heatBoundaryPage {
			fw.write(&api.HeatmapHistory{Boundaries: b[i:min(i+heatBoundaryPage, len(b))]})
		}
		for _, l := range h.GetLevels() {
			cols := l.GetColumns()
			for i := 0; i < len(cols); i += heatColumnPage {
				fw.write(&api.HeatmapLevel{Columns: cols[i:min(i+heatColumnPage, len(cols))]})
			}
		}
	}
	if fw.err != nil {
		return fw.err
	}
	return bw.Flush()
}

// fillRoute is catalog.RouteDescriptor.ToProto into an existing message
// (TestFillRouteMatchesToProto keeps the two equal).
func fillRoute(m *api.RouteDescriptor, r *catalog.RouteDescriptor) {
	m.RouteId = r.ID
	m.Start = r.Start
	m.End = r.End
	m.GroupId = r.GroupID
	m.State = api.RouteState(r.State)
	m.OperatorStart = r.OperatorStart
	m.ParentRouteId = r.ParentID
	m.SplitAtHlc = r.SplitAtHLC
	m.MergedFromLeft, m.MergedFromRight, m.MergedAtHlc = 0, 0, 0
	if mi := r.MergedFrom(); mi != nil {
		m.MergedFromLeft, m.MergedFromRight, m.MergedAtHlc = mi.Left, mi.Right, mi.AtHLC
	}
	m.TargetGroupId, m.MoveOpId = 0, 0
	if mv := r.Moving(); mv != nil {
		m.TargetGroupId, m.MoveOpId = mv.TargetGroupID, mv.OpID
	}
}

// frameWriter writes length-delimited deterministic messages and keeps the
// first error.
type frameWriter struct {
	w   *bufio.Writer
	buf []byte
	err error
}

func (fw *frameWriter) write(m proto.Message) {
	if fw.err != nil {
		return
	}
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(fw.buf[:0], m)
	if err != nil {
		fw.err = err
		return
	}
	fw.buf = b
	if len(b) > maxFrame {
		fw.err = fmt.Errorf("frame of %d bytes above %d", len(b), maxFrame)
		return
	}
	var n [binary.MaxVarintLen64]byte
	if _, err := fw.w.Write(binary.AppendUvarint(n[:0], uint64(len(b)))); err != nil {
		fw.err = err
		return
	}
	_, fw.err = fw.w.Write(b)
}

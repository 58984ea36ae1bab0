package heatmap

import (
	"bytes"
	"fmt"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/hlc"
)

// Mark is one split or merge on the picture. A two-step isolation is one
// mark with both keys.
type Mark struct {
	// AtHLC is the commit HLC of the change (package hlc has its layout).
	AtHLC uint64
	Kind  api.HeatmapMarkKind
	// SplitOrigin says why a split's key was chosen (splits only; any
	// SplitOrigin value); MergeOrigin who decided a merge (merges only).
	SplitOrigin api.SplitOrigin
	MergeOrigin api.HeatmapMergeOrigin
	// Keys are a split's keys (one, or the two of a two-step op) or the
	// boundary a merge removed, ascending. AddMark takes them whole; a kept
	// mark holds each cut to MaxMarkKeyLen bytes and its full length in
	// KeyLens (AddMark ignores KeyLens).
	Keys    [][]byte
	KeyLens []uint32
	// RouteID is the route that was split or the left route of a merge;
	// OpID the op of an automatic split (0: none).
	RouteID uint64
	OpID    uint64
}

// AtMs is the physical milliseconds of AtHLC.
func (m Mark) AtMs() uint64 { return hlc.Physical(m.AtHLC) }

// AddMark returns the history with one more mark. Marks come in commit
// order (an older one than the newest kept is ErrStale). A mark older than
// the oldest column kept is outside the picture and is not kept; beyond
// MaxMarks the oldest mark is evicted.
func (h *History) AddMark(m Mark) (*History, error) {
	if err := checkMark(m, false); err != nil {
		return nil, fmt.Errorf("%w: mark: %v", ErrInvalidInput, err)
	}
	if last, ok := h.marks.last(); ok && m.AtHLC < last.AtHLC {
		return nil, fmt.Errorf("%w: mark at_hlc %d is before the newest mark's %d", ErrStale, m.AtHLC, last.AtHLC)
	}
	if from, ok := h.oldestStartMs(); ok && m.AtMs() < from {
		return h, nil
	}
	kept := m
	kept.Keys = make([][]byte, len(m.Keys))
	kept.KeyLens = make([]uint32, len(m.Keys))
	for i, k := range m.Keys {
		kept.Keys[i] = bytes.Clone(k[:min(len(k), MaxMarkKeyLen)])
		kept.KeyLens[i] = uint32(len(k))
	}
	next := *h
	next.marks = h.marks.append(kept)
	if next.marks.n > MaxMarks {
		next.marks = next.marks.dropFront(next.marks.n - MaxMarks)
	}
	return &next, nil
}

// checkMark validates a mark given to AddMark (kept false: whole keys) or
// decoded from a snapshot (kept true: cut keys with their lengths).
func checkMark(m Mark, kept bool) error {
	bad := fmt.Errorf
	switch m.Kind {
	case api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT:
		if _, ok := api.SplitOrigin_name[int32(m.SplitOrigin)]; !ok {
			return bad("split_origin: %d is not a SplitOrigin", int32(m.SplitOrigin))
		}
		if m.MergeOrigin != api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_UNSPECIFIED {
			return bad("merge_origin: %s on a split", m.MergeOrigin)
		}
	case api.HeatmapMarkKind_HEATMAP_MARK_KIND_MERGE:
		if m.MergeOrigin != api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_MANUAL && m.MergeOrigin != api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_AUTOMATIC {
			return bad("merge_origin: %d is neither MANUAL nor AUTOMATIC", int32(m.MergeOrigin))
		}
		if m.SplitOrigin != api.SplitOrigin_SPLIT_ORIGIN_UNSPECIFIED {
			return bad("split_origin: %s on a merge", m.SplitOrigin)
		}
	default:
		return bad("kind: %d is neither SPLIT nor MERGE", int32(m.Kind))
	}
	if len(m.Keys) < 1 || len(m.Keys) > 2 {
		return bad("keys: %d, want 1 or 2", len(m.Keys))
	}
	if kept && len(m.KeyLens) != len(m.Keys) {
		return bad("key_lengths: %d for %d keys", len(m.KeyLens), len(m.Keys))
	}
	for i, k := range m.Keys {
		switch {
		case len(k) == 0:
			return bad("keys[%d]: empty (a split key or a removed boundary is never the empty key)", i)
		case !kept && len(k) > catalog.MaxBoundaryLen:
			return bad("keys[%d]: %d bytes above %d", i, len(k), catalog.MaxBoundaryLen)
		case kept && len(k) > MaxMarkKeyLen:
			return bad("keys[%d]: %d bytes above %d", i, len(k), MaxMarkKeyLen)
		case kept && m.KeyLens[i] > catalog.MaxBoundaryLen:
			return bad("key_lengths[%d]: %d above %d", i, m.KeyLens[i], catalog.MaxBoundaryLen)
		case kept && (m.KeyLens[i] < uint32(len(k)) || len(k) < MaxMarkKeyLen && m.KeyLens[i] != uint32(len(k))):
			return bad("key_lengths[%d]: %d does not fit a key of %d bytes cut at %d", i, m.KeyLens[i], len(k), MaxMarkKeyLen)
		}
	}
	if len(m.Keys) == 2 {
		c := bytes.Compare(m.Keys[0], m.Keys[1])
		// Cutting keeps the order but may make two long keys equal.
		if c > 0 || c == 0 && !(kept && len(m.Keys[0]) == MaxMarkKeyLen) {
			return bad("keys: %s is not below %s", catalog.FormatKey(m.Keys[0]), catalog.FormatKey(m.Keys[1]))
		}
	}
	return nil
}

// Marks returns the kept marks committed in [fromMs, toMs] with a key in
// [start, end) (end empty: +inf), oldest first. A cut key is compared as
// it is kept. The marks share their keys with h: do not modify them.
func (h *History) Marks(fromMs, toMs uint64, start, end []byte) []Mark {
	var out []Mark
	h.marks.ascend(func(m Mark) {
		if m.AtMs() < fromMs || m.AtMs() > toMs {
			return
		}
		for _, k := range m.Keys {
			if bytes.Compare(k, start) >= 0 && (len(end) == 0 || bytes.Compare(k, end) < 0) {
				out = append(out, m)
				return
			}
		}
	})
	return out
}

// MarkCount is the number of marks kept.
func (h *History) MarkCount() int { return h.marks.n }

// markList is a persistent FIFO of marks in chunks of markChunk: full
// chunks are shared between versions, appending copies only the last
// chunk and the chunk index, evicting only moves an offset.
type markList struct {
	// chunks are never modified once built; all but the last are full.
	chunks [][]Mark
	off    int // marks of chunks[0] already evicted
	n      int // marks kept
}

const markChunk = 64

func (l markList) at(i int) Mark {
	i += l.off
	return l.chunks[i/markChunk][i%markChunk]
}

func (l markList) last() (Mark, bool) {
	if l.n == 0 {
		return Mark{}, false
	}
	return l.at(l.n - 1), true
}

func (l markList) ascend(fn func(Mark)) {
	for i := range l.n {
		fn(l.at(i))
	}
}

func (l markList) append(m Mark) markList {
	chunks := slices.Clone(l.chunks)
	if k := len(chunks); k > 0 && len(chunks[k-1]) < markChunk {
		last := make([]Mark, len(chunks[k-1])+1)
		copy(last, chunks[k-1])
		last[len(last)-1] = m
		chunks[k-1] = last
	} else {
		chunks = append(chunks, []Mark{m})
	}
	return markList{chunks: chunks, off: l.off, n: l.n + 1}
}

func (l markList) dropFront(k int) markList {
	off, chunks := l.off+k, l.chunks
	drop := 0
	for drop < len(chunks) && off >= len(chunks[drop]) {
		off -= len(chunks[drop])
		drop++
	}
	if drop > 0 {
		chunks = slices.Clone(chunks[drop:])
	}
	if l.n == k {
		return markList{}
	}
	return markList{chunks: chunks, off: off, n: l.n - k}
}

// evictBefore drops the marks older than ms.
func (l markList) evictBefore(ms uint64) markList {
	k := 0
	for k < l.n && l.at(k).AtMs() < ms {
		k++
	}
	if k == 0 {
		return l
	}
	return l.dropFront(k)
}

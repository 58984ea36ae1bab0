// Package heatmap is the key visualizer's heat history: load over key space
// × time, with every split and merge, kept as replicated state so that every
// node — restored from a snapshot or joined by one — draws the same picture
// and it survives leader changes (docs/design.md#the-key-visualizer).
//
// A History is an immutable value. AddColumn and AddMark return a new
// History sharing all unchanged structure with the old one (appending a
// column copies at most a few hundred pointers, never the history), so the
// state machine captures it for a snapshot by keeping the pointer.
//
// What it keeps, per committed load column: at most MaxBands key bands
// derived from the per-route load of every live route (band boundaries are
// route boundaries cut to shortest separators and capped at
// MaxBoundaryLen bytes; adjacent routes merge, coldest pairs first, when
// there are more than MaxBands), with four totals per band (weighted
// operations, reads, writes, bytes). Older columns are merged pairwise into
// coarser levels (see History); at most MaxColumns are kept. Split and
// merge marks are a separate record of at most MaxMarks. ToProto and
// FromProto convert to the canonical api.HeatmapHistory used by snapshots
// and the state hash; FromProto validates everything (its input is outside
// bytes). Query answers the web page: a bounded matrix of time cells ×
// bands for a time and key range.
//
// It must stay deterministic, because every replica computes it inside
// Apply: no clock, no randomness, no goroutines, no map iteration in any
// output, integer arithmetic only; "now" is whatever the caller passes. It
// imports only api/hotsplitv1 and catalog. It does not decide anything:
// the state machine feeds it committed columns and catalog changes, and
// gates it on the cluster version.
package heatmap

package heatmap

import "errors"

// Sentinel errors. Every error of this package wraps one of them and names
// the offending field.
var (
	// ErrInvalidInput: a column, mark or query the caller built is
	// malformed (a caller bug, or bad outside input to Query).
	ErrInvalidInput = errors.New("heatmap: invalid input")
	// ErrStale: a column starts before the newest one ends, or a mark is
	// older than the newest mark. The state machine feeds committed
	// entries in log order, so this is a caller bug.
	ErrStale = errors.New("heatmap: out of order")
	// ErrInvalidHistory: an api.HeatmapHistory that FromProto refuses.
	ErrInvalidHistory = errors.New("heatmap: invalid history")
)

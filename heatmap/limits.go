package heatmap

// Limits of the history (documented in docs/design.md with the memory
// they imply).
const (
	// MaxBands is the most key bands a column has.
	MaxBands = 1024
	// MaxBoundaryLen caps a band boundary: boundaries are display keys,
	// and the cap bounds their memory whatever the route keys are.
	MaxBoundaryLen = 64
	// MaxMarkKeyLen caps each key of a mark (the full length is kept).
	MaxMarkKeyLen = 256
	// Levels and LevelColumns shape the downsampling: level i holds at
	// most LevelColumns columns, each the sum of 2^i committed columns.
	Levels       = 4
	LevelColumns = 256
	// MaxColumns is the most columns a history holds.
	MaxColumns = Levels * LevelColumns
	// MaxMarks is the most split and merge marks a history holds.
	MaxMarks = 4096
	// MaxCells is the most time cells a query answers.
	MaxCells = 1500
	// FormatVersion is the api.HeatmapHistory format this build writes and
	// reads.
	FormatVersion = 1
)

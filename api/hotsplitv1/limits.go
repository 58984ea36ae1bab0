package hotsplitv1

// Wire limits of the API (docs/design.md#limits-and-bad-input, docs/security.md). Both sides hold to
// them: a reporter trims what it sends to fit, and a node refuses what does
// not, so each is written here once.
const (
	// MaxReportBytes bounds the encoded size (proto.Size) of one
	// ReportRequest.
	MaxReportBytes = 4 << 20
	// MaxReportTopKeys bounds the top-K entries of one report row (and so
	// the capacity of a reporter's per-route sketch).
	MaxReportTopKeys = 256
	// MaxReportSamples bounds the operation sample of one report row.
	MaxReportSamples = 64
	// MaxColumnEvidenceBytes bounds the evidence of one committed load
	// column from cluster version 3 (bounded_evidence): the sum over its
	// rows of each row's encoded size (proto.Size, without the field's own
	// tag and length). With route_loads (about 15–25 bytes a route) and the
	// reporter list beside it, a column of 10,000 loaded routes stays under
	// 1 MB whatever the reporters send.
	MaxColumnEvidenceBytes = 512 << 10
	// MaxReportEvidenceBytes bounds the evidence (top keys and operation
	// samples) a reporter sends in one column: the encoded size of those
	// fields over its rows. The heaviest rows keep theirs. A committed
	// column carries no more evidence than this, and a merged row's
	// evidence is about as large as any one reporter's for the row or
	// larger, so at this bound a reporter covers at least as many rows as
	// its column can carry evidence for. More would cost the leader the
	// most per byte of anything it reads (a v2 row with evidence costs it
	// 25 times one without), only to be dropped at the entry. The leader
	// does not refuse more: reporters built without this bound send
	// evidence up to MaxReportBytes, and a rolling upgrade of the data
	// nodes must not lose their columns.
	MaxReportEvidenceBytes = MaxColumnEvidenceBytes
	// MaxMessageBytes is the largest gRPC message a node sends or
	// receives: a full report plus room for gRPC's framing and metadata.
	MaxMessageBytes = MaxReportBytes + 64<<10
)

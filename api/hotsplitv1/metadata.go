package hotsplitv1

// ReportBytesHeader is the gRPC metadata key with which a reporter declares
// the encoded size of its ReportRequest. A node admits a report against its
// byte budget before reading the body, charging the declared size (or the
// largest message size when none is declared); a report larger than it
// declared is refused.
const ReportBytesHeader = "hotsplit-report-bytes"

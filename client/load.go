package client

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Report sends a reporter's closed columns (a mutation: the server
// acknowledges a column only once it is committed). Definite failures are
// retried here with the leader hint; an unknown outcome is returned, and the
// reporter simply resends its unacknowledged columns later, which the server
// deduplicates by (reporter, column). ReportRequest has no request_id field:
// the generated id travels only in the RequestIDHeader metadata.
func (c *Client) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, api.ReportBytesHeader, strconv.Itoa(proto.Size(req)))
	return invoke(ctx, c, call{name: "Report", mutation: true, requestID: NewRequestID(), long: true},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.ReportResponse, error) {
			return api.NewLoadClient(cc).Report(ctx, req)
		})
}

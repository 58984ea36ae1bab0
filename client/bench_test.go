package client

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// BenchmarkReport measures what the client adds to one unary mutation
// (request id, metadata, readiness check, classification) next to the bare
// generated stub on the same loopback connection setup.
func BenchmarkReport(b *testing.B) {
	f := startFakeB(b, &fakeNode{report: func(int, *api.ReportRequest) (*api.ReportResponse, error) {
		return &api.ReportResponse{}, nil
	}})
	req := &api.ReportRequest{ReporterId: "dn1"}
	ctx := context.Background()
	b.Run("client", func(b *testing.B) {
		c, err := New(Config{Endpoints: []string{f.addr}, Insecure: true})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Report(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw_stub", func(b *testing.B) {
		cc, err := grpc.NewClient("passthrough:///"+f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		stub := api.NewLoadClient(cc)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stub.Report(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

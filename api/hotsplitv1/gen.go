// Package hotsplitv1 holds the generated protobuf and gRPC code of the
// hotsplit.v1 API: the route catalog, the Raft command envelope, the
// replicated state schema, load reports and the four services. Beside it,
// by hand, the few rules every side of the wire shares: node ids (ids.go),
// metadata keys (metadata.go), strict decoding of replicated bytes
// (strict.go) and the wire limits (limits.go).
//
// It imports nothing of hotsplit's. The generated *.pb.go files are
// committed so that building and testing never need protoc; regenerate them
// after editing a .proto file with (from the repository root):
//
//	go generate ./api/...
//
// which needs protoc 3.21 and the plugins named in docs/design.md.
package hotsplitv1

//go:generate protoc -I .. --go_out=.. --go_opt=paths=source_relative --go-grpc_out=.. --go-grpc_opt=paths=source_relative hotsplitv1/catalog.proto hotsplitv1/config.proto hotsplitv1/state.proto hotsplitv1/command.proto hotsplitv1/load.proto hotsplitv1/service.proto

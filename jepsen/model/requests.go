package model

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// requestShape is what binds a request id to its request (feature
// request_fingerprints, docs/design.md): the whole command with what may
// differ between two sends of one request cleared — the envelope's hlc,
// min_version and request id, and the body's self-declared note — in
// protobuf's deterministic encoding. Written from the rule, not from the
// FSM's code.
func requestShape(cmd *api.Command) []byte {
	c := proto.Clone(cmd).(*api.Command)
	c.Hlc, c.MinVersion, c.RequestId = 0, 0, ""
	m := c.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("body")); fd != nil && fd.Message() != nil {
		body := m.Mutable(fd).Message()
		if note := body.Descriptor().Fields().ByName("note"); note != nil {
			body.Clear(note)
		}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		// A command that decoded marshals again.
		panic(fmt.Sprintf("jepsen/model: marshal a decoded command: %v", err))
	}
	return b
}

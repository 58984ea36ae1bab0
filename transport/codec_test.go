package transport

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func TestCodecNamesTheBadField(t *testing.T) {
	str := func(num protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	sub := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	for _, tc := range []struct {
		name string
		msg  proto.Message
		b    []byte
		want string
	}{
		{"reason", &api.SetEnabledRequest{}, str(3, "ok\xff"), "reason: not valid UTF-8"},
		{"actor after a good field", &api.SetEnabledRequest{}, append(str(3, "fine"), str(2, "\xc3")...), "actor: not valid UTF-8"},
		{"nested reporter id", &api.ReportRequest{}, str(1, "\xff"), "reporter_id: not valid UTF-8"},
		{"truncated nested message", &api.ReportRequest{}, append(protowire.AppendTag(nil, 2, protowire.BytesType), 10, 1), "columns: truncated"},
		{"valid request", &api.JoinRequest{}, append(str(1, "n4"), str(2, "127.0.0.1:1")...), ""},
		{"unknown nested field with invalid UTF-8 is ignored", &api.SetConfigRequest{}, append(str(2, "me"), sub(1, str(99, "\xff"))...), ""},
		{"malformed tag", &api.LeaderRequest{}, []byte{0xff}, "request: malformed field tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRequestCodec()
			m := tc.msg.ProtoReflect().New().Interface()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.b)}, m); err != nil {
				t.Fatalf("codec returned %v; failures go to the interceptor", err)
			}
			why := c.decodeFailure(m)
			if tc.want == "" {
				if why != "" {
					t.Fatalf("good bytes reported %q", why)
				}
				return
			}
			if !strings.Contains(why, tc.want) {
				t.Fatalf("failure %q, want it to contain %q", why, tc.want)
			}
			if proto.Size(m) != 0 {
				t.Fatal("a request that did not decode was left half-filled")
			}
			if c.decodeFailure(m) != "" {
				t.Fatal("a failure was reported twice (the table must forget it)")
			}
		})
	}
}

// requestTypes are the request messages FuzzRequestCodec decodes into.
var requestTypes = []proto.Message{
	&api.ReportRequest{}, &api.SplitRangeRequest{}, &api.SetConfigRequest{}, &api.SetEnabledRequest{},
	&api.JoinRequest{}, &api.ListRoutesRequest{}, &api.AbortOpRequest{}, &api.MergeRangeRequest{},
}

// The codec accepts exactly what protobuf accepts, decodes it the same, and
// names a field (or the request) for everything else; it never panics.
func FuzzRequestCodec(f *testing.F) {
	f.Add(uint8(0), []byte{0x0a, 0x02, 'n', '1'})
	f.Add(uint8(3), []byte{0x1a, 0x01, 0xff})
	f.Add(uint8(0), []byte{0x12, 0x05, 0x12, 0x03, 0x32, 0x01, 0x08})
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		typ := requestTypes[int(which)%len(requestTypes)]
		c := newRequestCodec()
		m := typ.ProtoReflect().New().Interface()
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m); err != nil {
			t.Fatalf("codec returned %v", err)
		}
		want := typ.ProtoReflect().New().Interface()
		werr := proto.Unmarshal(b, want)
		why := c.decodeFailure(m)
		if r, ok := m.(*api.ReportRequest); ok {
			// A report keeps its bytes, and only its reporter id is set:
			// the bytes are what protobuf decodes, to the same content —
			// or, if protobuf refuses them further down than the codec
			// reads, the leader's full read refuses them too, and the
			// refusal is the one the codec gives any request that does
			// not decode.
			if w := c.reportWire(r); w != nil {
				defer w.free()
				if werr != nil {
					if _, cerr := api.CheckReportRequest(w.bytes()); cerr == nil {
						t.Fatalf("protobuf refuses it (%v), the wire reader accepts it", werr)
					}
					// What the codec's standard path records for these bytes.
					want := describeDecodeError(b, r.ProtoReflect().Descriptor(), werr)
					if st := status.Convert(decodeRefusal(w.bytes())); st.Code() != codes.InvalidArgument || st.Message() != want {
						t.Fatalf("refused as %v %q, the codec says %q", st.Code(), st.Message(), want)
					}
					return
				}
				var got api.ReportRequest
				if err := proto.Unmarshal(w.bytes(), &got); err != nil || !proto.Equal(&got, want) || r.GetReporterId() != got.GetReporterId() {
					t.Fatalf("the kept bytes decode to other content (%v), or reporter id %q", err, r.GetReporterId())
				}
				return
			}
		}
		switch {
		case werr == nil && why != "":
			t.Fatalf("protobuf decodes it, codec says %q", why)
		case werr == nil && !proto.Equal(m, want):
			t.Fatal("codec decoded differently from protobuf")
		case werr != nil && why == "":
			t.Fatalf("protobuf refuses it (%v), codec reported nothing", werr)
		}
	})
}

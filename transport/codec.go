package transport

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// requestCodec is the servers' "proto" codec. gRPC turns any decode error
// into Internal, which tells a client nothing and blames the server; a
// request that does not decode — invalid UTF-8 in a string field, a
// truncated field — is the caller's error. So the codec decodes with the
// standard codec and, on failure, resets the message, records what was
// wrong and reports success; the interceptors (decodeFailure) then answer
// InvalidArgument naming the field before any handler runs.
//
// A load report is not decoded into messages at all: the codec keeps the
// bytes that arrived (a buffer from gRPC's pool), reads only the request's
// top level — reporter_id, what authorization and the handler's checks
// need, and where each column lies — and leaves the bytes for the leader's
// aggregator, which validates and merges them in place (reportWire). The
// aggregator reads every row anyway: bytes protobuf would not decode
// further down are refused there, with the refusal this codec would have
// given (takeReport), so a report is parsed twice on the leader, not three
// times. Bytes whose top level does not decode take the standard path.
//
// Concurrency: safe for concurrent use. A failure or a report's bytes are
// recorded under the message pointer and taken out by the interceptor of
// the same call, so the tables hold at most one entry per call in flight.
type requestCodec struct {
	inner encoding.CodecV2

	failures sync.Map // message pointer (any) -> string
	reports  sync.Map // *api.ReportRequest -> *reportWire
}

// reportWire is a load report's bytes as they arrived, in a pooled buffer:
// given back (free) once the report is merged or forwarded, exactly once.
//
// Concurrency: free and bytes are called by the one goroutine handling the
// call.
type reportWire struct {
	buf mem.Buffer // nil once freed
}

// bytes is the report's encoding, valid until free.
func (w *reportWire) bytes() []byte { return w.buf.ReadOnlyData() }

func (w *reportWire) len() int { return w.buf.Len() }

// free gives the buffer back; later calls do nothing.
func (w *reportWire) free() {
	if w != nil && w.buf != nil {
		w.buf.Free()
		w.buf = nil
	}
}

func newRequestCodec() *requestCodec {
	return &requestCodec{inner: encoding.GetCodecV2("proto")}
}

func (c *requestCodec) Name() string { return c.inner.Name() }

func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*api.ReportRequest); ok {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		if id, _, err := api.ReadReportRequest(buf.ReadOnlyData()); err == nil {
			proto.Reset(r)
			r.ReporterId = id
			c.reports.Store(r, &reportWire{buf: buf})
			return nil
		}
		buf.Free() // the standard path names what is wrong
	}
	err := c.inner.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	b := data.Materialize()
	proto.Reset(m)
	c.failures.Store(v, describeDecodeError(b, m.ProtoReflect().Descriptor(), err))
	return nil
}

// decodeFailure returns what was wrong with the bytes req was decoded from,
// or "" if it decoded; it forgets the failure.
func (c *requestCodec) decodeFailure(req any) string {
	if why, ok := c.failures.LoadAndDelete(req); ok {
		return why.(string)
	}
	return ""
}

// reportWire returns the bytes req arrived as, or nil if it did not come
// through the codec's report path; it forgets them.
func (c *requestCodec) reportWire(req *api.ReportRequest) *reportWire {
	if w, ok := c.reports.LoadAndDelete(req); ok {
		return w.(*reportWire)
	}
	return nil
}

// decodeRefusal is the refusal of report bytes protobuf does not decode,
// as the codec words it for any request.
func decodeRefusal(b []byte) error {
	var m api.ReportRequest
	err := proto.Unmarshal(b, &m)
	if err == nil {
		err = errors.New("the report does not decode") // the wire reader's word against protobuf's
	}
	return status.Error(codes.InvalidArgument, describeDecodeError(b, m.ProtoReflect().Descriptor(), err))
}

// describeDecodeError names the first field of b that a strict protobuf
// decoder refuses: a string that is not UTF-8, or a field that is truncated
// or malformed. It falls back to the decoder's own message.
func describeDecodeError(b []byte, md protoreflect.MessageDescriptor, err error) string {
	if why := badField(b, md, "", 0); why != "" {
		return why
	}
	return fmt.Sprintf("request does not decode: %v", err)
}

// maxDecodeDepth bounds the recursion of firstBadField over nested messages
// (protobuf-go itself refuses nesting deeper than 10000).
const maxDecodeDepth = 100

func badField(b []byte, md protoreflect.MessageDescriptor, path string, depth int) string {
	if depth > maxDecodeDepth {
		return fmt.Sprintf("%s: nested too deeply", orRequest(path))
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Sprintf("%s: malformed field tag", orRequest(path))
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		name := fmt.Sprintf("%sfield %d", prefix(path), num)
		if fd != nil {
			name = prefix(path) + string(fd.Name())
		}
		if typ != protowire.BytesType || fd == nil {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Sprintf("%s: truncated or malformed", name)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Sprintf("%s: truncated or malformed", name)
		}
		b = b[n:]
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
			return fmt.Sprintf("%s: not valid UTF-8", name)
		case fd.Message() != nil:
			if why := badField(v, fd.Message(), name, depth+1); why != "" {
				return why
			}
		}
	}
	return ""
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + "."
}

func orRequest(path string) string {
	if path == "" {
		return "request"
	}
	return path
}

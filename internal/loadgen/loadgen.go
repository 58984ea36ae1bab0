// Package loadgen builds the load reports of the load benchmarks
// (docs/benchmarks.md): every reporter reports every route of a catalog,
// in the row shape of a version 1 or a version 2 data node, encoded once
// before a run so that the run measures the cluster, not the reporters.
// It is imported by _test.go files only; no import table admits it.
//
// A report is sent as two parts — a small per-report head naming the
// reporter and the window, and the encoded rows, shared by every report of
// one row variant — through Codec, which hands gRPC the parts without
// copying them. Protobuf decodes the concatenation exactly as it would a
// marshalled ReportRequest. Send and SendAt send them as data nodes do:
// with the declared size, as the window closes, a failed call resent.
package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/keyviz"
)

// Shape is the row shape of a report.
type Shape int

const (
	// V1 rows: counts and the route's buckets; one route in 100 is hot, with
	// 8 top keys (a version 1 data node).
	V1 Shape = iota
	// V2 rows: every row also carries 8 top keys with raw sampled counts and
	// a 32-key operation sample (a version 2 data node whose every route
	// is busy enough to fill its reservoir). The report is trimmed as a
	// keyviz reporter trims it (keyviz.TrimColumn): its rows' evidence to
	// api.MaxReportEvidenceBytes, the lightest rows losing their top keys
	// and samples first.
	V2
)

func (s Shape) String() string {
	if s == V1 {
		return "v1"
	}
	return "v2"
}

// Report layout constants.
const (
	// Buckets is the bucket count the reports use (the replicated default).
	Buckets = 16
	// WriteWeight and ReadWeight are the weights the reports declare.
	WriteWeight, ReadWeight = 4, 1
	// Variants is how many distinct row sets the reporters share: reporter
	// i sends variant i % Variants, so N reporters cost the generator 4
	// encodings, and each row merges 4 reporters' distinct keys.
	Variants = 4
	// MaxReporterID bounds the reporter ids a report's size is planned for.
	MaxReporterID = 64
	// hotEvery: one route in hotEvery is hot in every shape.
	hotEvery = 100
)

// Rows holds the encoded rows of every variant of one shape over a
// catalog: the bytes of ReportColumn field 6, repeated.
type Rows struct {
	Shape Shape
	// Encoded[v] are variant v's rows.
	Encoded [Variants][]byte
	// Count is the rows per report; WithEvidence those of them that kept
	// top keys or samples after trimming (variant 0).
	Count, WithEvidence int
}

// Build encodes the rows of every variant of shape over the routes of cat,
// each report within api.MaxReportBytes and its evidence within
// api.MaxReportEvidenceBytes.
func Build(shape Shape, cat *catalog.Catalog) (*Rows, error) {
	return BuildWithin(shape, cat, api.MaxReportBytes)
}

// BuildWithin is Build with reports trimmed to maxBytes.
func BuildWithin(shape Shape, cat *catalog.Catalog, maxBytes int) (*Rows, error) {
	var routes []*catalog.RouteDescriptor
	cat.Ascend(func(r *catalog.RouteDescriptor) bool { routes = append(routes, r); return true })
	out := &Rows{Shape: shape, Count: len(routes)}
	for v := range Variants {
		rng := rand.New(rand.NewPCG(uint64(v)+1, 2))
		rows := make([]*api.ReportRow, 0, len(routes))
		for i, d := range routes {
			rows = append(rows, row(shape, d, i, v, rng))
		}
		// Trimmed as a reporter with the longest id trims its column (every
		// field set, the window the largest), then encoded without the
		// fields Head writes.
		col := &api.ReportColumn{WindowStartMs: 1 << 62, StepMs: 1 << 40, Buckets: Buckets,
			WriteWeight: WriteWeight, ReadWeight: ReadWeight, Rows: rows}
		overhead := proto.Size(&api.ReportRequest{ReporterId: string(make([]byte, MaxReporterID))}) +
			protowire.SizeTag(2) + protowire.SizeVarint(uint64(maxBytes))
		keyviz.TrimColumn(col, maxBytes-overhead)
		if v == 0 {
			for _, r := range col.Rows {
				if len(r.TopKeys) > 0 || len(r.Samples) > 0 {
					out.WithEvidence++
				}
			}
		}
		col = &api.ReportColumn{Rows: col.Rows}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(col)
		if err != nil {
			return nil, fmt.Errorf("loadgen: encode variant %d: %w", v, err)
		}
		out.Encoded[v] = b
	}
	return out, nil
}

// row is route d's row (index i) of variant v.
func row(shape Shape, d *catalog.RouteDescriptor, i, v int, rng *rand.Rand) *api.ReportRow {
	w := uint64(1 + rng.IntN(50))
	hot := i%hotEvery == 0
	if hot {
		w = 2000
	}
	nb := catalog.NewLayout(d.Start, d.End, Buckets).K()
	buckets := make([]uint64, nb)
	buckets[rng.IntN(nb)] = WriteWeight * w
	r := &api.ReportRow{RouteId: d.ID, Writes: w, WriteBytes: 100 * w, Buckets: buckets, SampleRate: 16}
	switch {
	case shape == V1 && hot:
		for j := range 8 {
			r.TopKeys = append(r.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "%s-key%d", d.Start, j), Count: uint64(400 - j)})
		}
	case shape == V2:
		// Sampled 1 in 16: w/16 weighted events, at least one each.
		sampled := max(w/16, 40)
		r.SampledWrites = sampled
		for j := range 8 {
			c := sampled/uint64(8+j) + 1
			r.TopKeys = append(r.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "%s-k%02d", d.Start, j), Count: WriteWeight * c, SampledWrites: c})
		}
		for j := range 32 {
			r.Samples = append(r.Samples, &api.SampledKey{Key: fmt.Appendf(nil, "%s-s%d%02d", d.Start, v, j), Writes: uint32(1 + (j+v)%3)})
		}
	}
	return r
}

// Head is the encoded start of reporter's report of window [window,
// window+step) whose rows are rows: the reporter id, the column's tag and
// length, and the column's fields but its rows. Head followed by rows is
// the whole ReportRequest.
func Head(reporter string, window, step uint64, rows []byte) ([]byte, error) {
	if len(reporter) > MaxReporterID {
		return nil, fmt.Errorf("loadgen: reporter id %q longer than %d", reporter, MaxReporterID)
	}
	colHead, err := proto.Marshal(&api.ReportColumn{WindowStartMs: window, StepMs: step, Buckets: Buckets, WriteWeight: WriteWeight, ReadWeight: ReadWeight})
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(&api.ReportRequest{ReporterId: reporter})
	if err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(colHead)+len(rows)))
	return append(b, colHead...), nil
}

// Parts is a request in wire form, in pieces sent one after the other.
type Parts [][]byte

// Len is the request's encoded size.
func (p Parts) Len() int {
	n := 0
	for _, b := range p {
		n += len(b)
	}
	return n
}

// Codec sends Parts as they are (no copy) and decodes responses with
// protobuf; use it with grpc.ForceCodecV2.
type Codec struct{}

// Marshal hands gRPC the parts.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	p, ok := v.(Parts)
	if !ok {
		return nil, fmt.Errorf("loadgen.Codec: cannot send %T", v)
	}
	out := make(mem.BufferSlice, len(p))
	for i, b := range p {
		out[i] = mem.SliceBuffer(b)
	}
	return out, nil
}

// Unmarshal decodes a response.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("loadgen.Codec: cannot decode into %T", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

// Name is the proto codec's name, so the server decodes with its own.
func (Codec) Name() string { return encoding.GetCodecV2("proto").Name() }

// SendAt is when reporter r of n sends its report of window [w, w+step):
// as the window closes, the n reporters spread over 50 ms, as data nodes
// closing the same window are.
func SendAt(w, stepMs uint64, r, n int) time.Time {
	return time.UnixMilli(int64(w + stepMs)).Add(time.Duration(r) * 50 * time.Millisecond / time.Duration(n))
}

// Send sends the report p through cc with its declared size, as a data
// node does, and returns the first answer. A failed call is reported to
// failed and resent after 50 ms, at most sendAttempts times in all; ok is
// false when none answered.
func Send(cc grpc.ClientConnInterface, p Parts, failed func(error)) (resp *api.ReportResponse, ok bool) {
	ctx := metadata.AppendToOutgoingContext(context.Background(), api.ReportBytesHeader, strconv.Itoa(p.Len()))
	for range sendAttempts {
		resp = &api.ReportResponse{}
		err := cc.Invoke(ctx, api.Load_Report_FullMethodName, p, resp, grpc.ForceCodecV2(Codec{}))
		if err == nil {
			return resp, true
		}
		failed(err)
		time.Sleep(50 * time.Millisecond)
	}
	return nil, false
}

// sendAttempts bounds Send's calls of one report.
const sendAttempts = 5

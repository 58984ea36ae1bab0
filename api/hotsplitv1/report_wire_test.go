package hotsplitv1

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// messageOf rebuilds the message the wire reader read from b.
func messageOf(t *testing.T, b []byte) *ReportRequest {
	t.Helper()
	id, cols, err := ReadReportRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	out := &ReportRequest{ReporterId: id}
	for _, cb := range cols {
		c, err := ReadColumn(cb)
		if err != nil {
			t.Fatal(err)
		}
		col := &ReportColumn{WindowStartMs: c.WindowStartMs, StepMs: c.StepMs, Buckets: c.Buckets, WriteWeight: c.WriteWeight, ReadWeight: c.ReadWeight}
		var r WireRow
		n := 0
		c.Rows(func(_ int, rb []byte) bool {
			if err = r.Read(rb); err != nil {
				return false
			}
			row := &ReportRow{RouteId: r.RouteID, Reads: r.Reads, Writes: r.Writes, ReadBytes: r.ReadBytes, WriteBytes: r.WriteBytes,
				Buckets: append([]uint64(nil), r.Buckets...), SampleRate: r.SampleRate, TopKDegraded: r.TopKDegraded,
				SampledReads: r.SampledReads, SampledWrites: r.SampledWrites}
			for _, k := range r.TopKeys {
				row.TopKeys = append(row.TopKeys, &TopKeyCount{Key: k.Key, Count: k.Count, Error: k.Error, SampledReads: k.SampledReads, SampledWrites: k.SampledWrites})
			}
			for _, s := range r.Samples {
				row.Samples = append(row.Samples, &SampledKey{Key: s.Key, Reads: s.Reads, Writes: s.Writes})
			}
			col.Rows = append(col.Rows, row)
			n++
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != c.NumRows {
			t.Fatalf("%d rows read, NumRows %d", n, c.NumRows)
		}
		out.Columns = append(out.Columns, col)
	}
	return out
}

// dropUnknown clears the unknown fields of m and every message in it.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message())
			}
		case !fd.IsList() && fd.Message() != nil:
			dropUnknown(v.Message())
		}
		return true
	})
}

// FuzzReportWire: the wire reader accepts exactly the bytes proto.Unmarshal
// accepts as a ReportRequest and reads from them exactly what it decodes
// (unknown fields aside, which nothing reads).
func FuzzReportWire(f *testing.F) {
	full := &ReportRequest{ReporterId: "dn1", Columns: []*ReportColumn{{WindowStartMs: 5000, StepMs: 1000, Buckets: 16, WriteWeight: 4, ReadWeight: 1,
		Rows: []*ReportRow{{RouteId: 2, Reads: 1, Writes: 2, ReadBytes: 3, WriteBytes: 4, Buckets: []uint64{1, 0, 300}, SampleRate: 16, TopKDegraded: true,
			TopKeys: []*TopKeyCount{{Key: []byte("k"), Count: 9, Error: 1, SampledReads: 2, SampledWrites: 1}},
			Samples: []*SampledKey{{Key: []byte("s"), Reads: 1, Writes: 2}}, SampledReads: 5, SampledWrites: 6}}}}}
	b, err := proto.Marshal(full)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// Packed buckets read eight one-byte values at a time, and one by one
	// around a longer varint.
	full.Columns[0].Rows[0].Buckets = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 300, 1, 2, 3, 4, 5, 6, 7, 8, 1 << 40, 0}
	if b, err = proto.Marshal(full); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// Unpacked buckets, a scalar twice, a known field with another wire
	// type, an unknown group.
	odd := protowire.AppendTag(nil, 1, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 7)
	odd = protowire.AppendTag(odd, 6, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 5)
	odd = protowire.AppendTag(odd, 1, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 8)
	odd = protowire.AppendTag(odd, 2, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte("x"))
	odd = protowire.AppendTag(odd, 99, protowire.StartGroupType)
	odd = protowire.AppendTag(odd, 99, protowire.EndGroupType)
	col := protowire.AppendTag(nil, 6, protowire.BytesType)
	col = protowire.AppendBytes(col, odd)
	req := protowire.AppendTag(nil, 2, protowire.BytesType)
	f.Add(protowire.AppendBytes(req, col))
	f.Add([]byte{0x0a, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want ReportRequest
		perr := proto.Unmarshal(b, &want)
		if _, err := CheckReportRequest(b); (err == nil) != (perr == nil) {
			t.Fatalf("protobuf says %v, the wire reader %v", perr, err)
		}
		if perr != nil {
			return
		}
		dropUnknown(want.ProtoReflect())
		if got := messageOf(t, b); !proto.Equal(got, &want) {
			t.Fatalf("read\n%v\nprotobuf decodes\n%v", got, &want)
		}
	})
}

// TestReadResetsEveryField: Read resets the row field by field (it is hot);
// a field added to WireRow and not reset would carry one row's value into
// the next. Every field is set, then an empty row is read.
func TestReadResetsEveryField(t *testing.T) {
	var r WireRow
	full := &ReportRow{RouteId: 1, Reads: 2, Writes: 3, ReadBytes: 4, WriteBytes: 5, Buckets: []uint64{6}, SampleRate: 7, TopKDegraded: true,
		TopKeys: []*TopKeyCount{{Key: []byte("k"), Count: 8}}, Samples: []*SampledKey{{Key: []byte("s"), Reads: 9}}, SampledReads: 10, SampledWrites: 11}
	b, err := proto.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Read(b); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the full row leaves WireRow.%s unset: set it in this test", v.Type().Field(i).Name)
		}
	}
	if err := r.Read(nil); err != nil {
		t.Fatal(err)
	}
	v = reflect.ValueOf(r)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Slice && f.Len() == 0 {
			continue // reused, emptied
		}
		if !f.IsZero() {
			t.Errorf("WireRow.%s = %v after reading an empty row", v.Type().Field(i).Name, f)
		}
	}
}

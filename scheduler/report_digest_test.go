package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// scrambled encodes m the way no marshaller does but every decoder
// accepts: fields in decreasing number order, repeated scalars unpacked,
// and every set singular scalar preceded by a decoy of itself that the
// real value, coming last, overrides.
func scrambled(m protoreflect.Message) []byte {
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	slices.SortFunc(fields, func(a, b protoreflect.FieldDescriptor) int { return int(b.Number()) - int(a.Number()) })
	var b []byte
	for _, fd := range fields {
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				b = appendValue(b, fd, l.Get(i))
			}
		default:
			if decoy, ok := decoyOf(fd, v); ok {
				b = appendValue(b, fd, decoy)
			}
			b = appendValue(b, fd, v)
		}
	}
	return b
}

func decoyOf(fd protoreflect.FieldDescriptor, v protoreflect.Value) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(v.Uint() + 1), true
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(v.Uint()) + 1), true
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(!v.Bool()), true
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(append([]byte("decoy"), v.Bytes()...)), true
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("decoy" + v.String()), true
	}
	return v, false // messages merge rather than override: no decoy
}

func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.Uint64Kind, protoreflect.Uint32Kind:
		b = protowire.AppendTag(b, fd.Number(), protowire.VarintType)
		return protowire.AppendVarint(b, v.Uint())
	case protoreflect.BoolKind:
		b = protowire.AppendTag(b, fd.Number(), protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool()))
	case protoreflect.BytesKind:
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		return protowire.AppendBytes(b, v.Bytes())
	case protoreflect.StringKind:
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		return protowire.AppendString(b, v.String())
	case protoreflect.MessageKind:
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		return protowire.AppendBytes(b, scrambled(v.Message()))
	}
	panic(fmt.Sprintf("scrambled: field %s of kind %v", fd.FullName(), fd.Kind()))
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

// FuzzColumnDigestCanonical: a column's digest is a function of its
// content, not of its encoding. Any column that decodes digests the same
// as its deterministic re-encoding and as a scrambled one (fields out of
// order, repeated scalars unpacked, singular scalars given twice) — both
// decode to equal content — and a column whose content differs in one
// count digests differently.
func FuzzColumnDigestCanonical(f *testing.F) {
	for _, c := range []*api.ReportColumn{
		reportCol(5000),
		reportCol(5000, &api.ReportRow{RouteId: 2, Reads: 3, Writes: 4, Buckets: buckets16(1, 2), SampleRate: 16,
			TopKeys: []*api.TopKeyCount{sampledKeyCount("h", 1, 2, 1)}, Samples: []*api.SampledKey{{Key: []byte("h"), Writes: 2}},
			SampledReads: 1, SampledWrites: 2, TopKDegraded: true}),
		benchColumn(0, 1),
	} {
		c.Rows = c.Rows[:min(len(c.Rows), 3)]
		b, err := proto.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c api.ReportColumn
		if proto.Unmarshal(b, &c) != nil {
			return
		}
		dropUnknown(c.ProtoReflect()) // unknown fields are not content
		digest := func(c *api.ReportColumn) uint64 {
			b, err := proto.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			return columnDigest(b)
		}
		want := digest(&c)
		det, err := proto.MarshalOptions{Deterministic: true}.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		for name, enc := range map[string][]byte{"as received": b, "deterministic": det, "scrambled": scrambled(c.ProtoReflect())} {
			var c2 api.ReportColumn
			if err := proto.Unmarshal(enc, &c2); err != nil {
				t.Fatalf("%s encoding does not decode: %v", name, err)
			}
			dropUnknown(c2.ProtoReflect())
			if !proto.Equal(&c, &c2) {
				t.Fatalf("%s encoding decodes to other content", name)
			}
			if got := columnDigest(enc); got != want {
				t.Fatalf("%s encoding digests %x, the content %x", name, got, want)
			}
		}
		other := proto.CloneOf(&c)
		if len(other.Rows) > 0 {
			other.Rows[0].Reads++
		} else {
			other.WindowStartMs++
		}
		if digest(other) == want {
			t.Fatalf("a column with other content digests the same")
		}
	})
}

// Validation computes the same digests as columnDigest, in the report's
// column order.
func TestValidationDigests(t *testing.T) {
	cat := narrowCatalog(t)
	r := validReport() // two columns
	w := wireOf(t, r)
	cols, rej := validateReport(w, cat, validateConfig(), validNowMs)
	if rej != nil {
		t.Fatal(rej.msg)
	}
	if len(cols) != 2 || cols[0].digest != columnDigest(w.columns[0]) || cols[1].digest != columnDigest(w.columns[1]) || cols[0].digest == cols[1].digest {
		t.Fatalf("digests %x %x, want %x and %x", cols[0].digest, cols[1].digest, columnDigest(w.columns[0]), columnDigest(w.columns[1]))
	}
}

// Bytes protobuf would not decode are refused as malformed even when
// validation finds another problem first: decoding comes first.
func TestUndecodableBeatsOtherRejections(t *testing.T) {
	cat := narrowCatalog(t)
	r := validReport()
	r.Columns[0].StepMs = 7 // a wrong step: validation stops here
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// A last column whose row is a truncated field.
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), []byte{0x08})
	b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), bad)
	_, _, rej, err := checkReport(b, cat, validateConfig(), validNowMs, new(rowScratch))
	if !errors.Is(err, api.ErrMalformedReport) || rej == nil || rej.reason != rejectMalformed {
		t.Fatalf("rejection %+v, err %v: want malformed", rej, err)
	}
	// The same report that decodes: the step.
	good, _ := proto.Marshal(r)
	if _, _, rej, err := checkReport(good, cat, validateConfig(), validNowMs, new(rowScratch)); err != nil || rej == nil || rej.reason != rejectStep {
		t.Fatalf("rejection %+v, err %v: want the step", rej, err)
	}
}

package columns

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

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
	cols, rej := validateReport(w, cat, validateConfig(), validNowMs, new(rowScratch))
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

// TestRowDigestSeparatesContentProperty: two rows digest equal exactly
// when their content is equal. The second row is mostly the first with
// one small change — one field of the row, of a top key or of a sample
// moved by one, a key replaced by one whose bytes shift into its
// neighbour's ("ab", "c" against "a", "bc"), an entry dropped or
// repeated — so that a field left out of the digest, or two contents
// feeding the lanes alike, shows.
func TestRowDigestSeparatesContentProperty(t *testing.T) {
	// Pairs a careless packing confuses: "a" and "aaa" pack alike but
	// for their length, "abc" and "axc" differ in the middle byte only.
	keys := []string{"", "a", "aaa", "ab", "abc", "axc", "bc", "c", "abcdefg", "abcdefgh", "abcdefghi", "bcdefghi", "abcdefghijklmnop", "abcdefghijklmnopq"}
	small := rapid.Uint64Range(0, 2)
	drawKey := func(t *rapid.T) []byte { return []byte(rapid.SampledFrom(keys).Draw(t, "key")) }
	drawTop := func(t *rapid.T) api.WireTopKey {
		return api.WireTopKey{Key: drawKey(t), Count: small.Draw(t, "count"), Error: small.Draw(t, "error"),
			SampledReads: small.Draw(t, "sampled reads"), SampledWrites: small.Draw(t, "sampled writes")}
	}
	drawSample := func(t *rapid.T) api.WireSample {
		return api.WireSample{Key: drawKey(t), Reads: uint32(small.Draw(t, "reads")), Writes: uint32(small.Draw(t, "writes"))}
	}
	drawRow := func(t *rapid.T) api.WireRow {
		r := api.WireRow{
			RouteID: small.Draw(t, "route"), Reads: small.Draw(t, "reads"), Writes: small.Draw(t, "writes"),
			ReadBytes: small.Draw(t, "read bytes"), WriteBytes: small.Draw(t, "write bytes"),
			SampleRate: uint32(small.Draw(t, "rate")), TopKDegraded: rapid.Bool().Draw(t, "degraded"),
			SampledReads: small.Draw(t, "sampled reads"), SampledWrites: small.Draw(t, "sampled writes"),
			Buckets: rapid.SliceOfN(small, 0, 9).Draw(t, "buckets"),
		}
		for range rapid.IntRange(0, 3).Draw(t, "top keys") {
			r.TopKeys = append(r.TopKeys, drawTop(t))
		}
		for range rapid.IntRange(0, 5).Draw(t, "samples") {
			r.Samples = append(r.Samples, drawSample(t))
		}
		return r
	}
	// nudge returns r with one small change (r's slices are not shared).
	nudge := func(t *rapid.T, r api.WireRow) api.WireRow {
		r.Buckets, r.TopKeys, r.Samples = slices.Clone(r.Buckets), slices.Clone(r.TopKeys), slices.Clone(r.Samples)
		u64 := []*uint64{&r.RouteID, &r.Reads, &r.Writes, &r.ReadBytes, &r.WriteBytes, &r.SampledReads, &r.SampledWrites}
		switch rapid.IntRange(0, 7).Draw(t, "change") {
		case 0:
			*u64[rapid.IntRange(0, len(u64)-1).Draw(t, "field")]++
		case 1:
			r.SampleRate++
		case 2:
			r.TopKDegraded = !r.TopKDegraded
		case 3:
			if len(r.Buckets) > 0 {
				r.Buckets[rapid.IntRange(0, len(r.Buckets)-1).Draw(t, "bucket")]++
			} else {
				r.Buckets = append(r.Buckets, 0)
			}
		case 4:
			if len(r.TopKeys) == 0 {
				r.TopKeys = append(r.TopKeys, drawTop(t))
				break
			}
			k := &r.TopKeys[rapid.IntRange(0, len(r.TopKeys)-1).Draw(t, "top key")]
			f := []*uint64{&k.Count, &k.Error, &k.SampledReads, &k.SampledWrites}
			*f[rapid.IntRange(0, len(f)-1).Draw(t, "top key field")]++
		case 5:
			if len(r.Samples) == 0 {
				r.Samples = append(r.Samples, drawSample(t))
				break
			}
			s := &r.Samples[rapid.IntRange(0, len(r.Samples)-1).Draw(t, "sample")]
			if rapid.Bool().Draw(t, "reads") {
				s.Reads++
			} else {
				s.Writes++
			}
		case 6: // another key somewhere
			if n := len(r.Samples); n > 0 && rapid.Bool().Draw(t, "in samples") {
				r.Samples[rapid.IntRange(0, n-1).Draw(t, "sample")].Key = drawKey(t)
			} else if n := len(r.TopKeys); n > 0 {
				r.TopKeys[rapid.IntRange(0, n-1).Draw(t, "top key")].Key = drawKey(t)
			}
		case 7: // an entry dropped, or the first one repeated
			if n := len(r.Samples); n > 0 && rapid.Bool().Draw(t, "drop") {
				r.Samples = r.Samples[:n-1]
			} else if len(r.TopKeys) > 0 {
				r.TopKeys = append(r.TopKeys, r.TopKeys[0])
			}
		}
		return r
	}
	digest := func(r *api.WireRow) uint64 {
		d := newDigester()
		d.row(r)
		return d.sum()
	}
	rapid.Check(t, func(t *rapid.T) {
		for range 20 { // pairs per check: the space is small, the checks few
			a := drawRow(t)
			b := drawRow(t)
			if rapid.IntRange(0, 9).Draw(t, "nudged") > 0 {
				b = nudge(t, a)
			}
			if same, equal := digest(&a) == digest(&b), reflect.DeepEqual(a, b); same != equal {
				t.Fatalf("rows equal: %v, digests equal: %v\n%+v\n%+v", equal, same, a, b)
			}
		}
	})
}

// BenchmarkRowDigest is the digest of one row of each shape the load
// benchmarks send: v1 (16 buckets) and v2 (16 buckets, 8 top keys, 32
// sampled keys of 11 bytes).
func BenchmarkRowDigest(b *testing.B) {
	v1 := api.WireRow{RouteID: 7, Writes: 100, Buckets: make([]uint64, 16), SampleRate: 16}
	v2 := v1
	for j := range 8 {
		v2.TopKeys = append(v2.TopKeys, api.WireTopKey{Key: fmt.Appendf(nil, "r00001-k%02d", j), Count: 5, SampledWrites: 1})
	}
	for j := range 32 {
		v2.Samples = append(v2.Samples, api.WireSample{Key: fmt.Appendf(nil, "r00001-s%03d", j), Writes: 2})
	}
	for _, c := range []struct {
		name string
		row  *api.WireRow
	}{{"v1", &v1}, {"v2", &v2}} {
		b.Run(c.name, func(b *testing.B) {
			d := newDigester()
			for b.Loop() {
				d.row(c.row)
			}
		})
	}
}

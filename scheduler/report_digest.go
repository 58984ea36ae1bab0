package scheduler

import (
	"encoding/binary"
	"hash/maphash"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// digestKey keys the content digests of reported columns; digests are
// compared only within this process, so a reporter cannot prepare two
// contents with one digest.
var digestKey = maphash.String(maphash.MakeSeed(), "hotsplit column digest") | 1

// digester fingerprints a reported column from its canonical form: every
// field the merge reads, in a fixed order, repeated fields with their
// length. Two encodings of the same content — packed or unpacked repeated
// scalars, a scalar repeated (the last one counts), fields in another order
// — decode to the same values and so digest equal; unknown fields are not
// content (nothing merges them) and are left out. It is fed while the
// column is validated, so a report is walked once.
type digester struct {
	lanes [digestLanes]uint64
	n     uint64 // words fed
}

// digestLanes independent chains take the words in turn, so a row's words
// are mixed in parallel rather than each waiting for the previous
// multiply.
const digestLanes = 4

func newDigester() digester {
	var d digester
	for i := range d.lanes {
		d.lanes[i] = digestKey + uint64(i)*0x9e3779b97f4a7c15
	}
	return d
}

// u64 feeds one word: a multiply in its lane, the full mix at the end
// (sum); the keyed start keeps digests unpredictable across processes.
func (d *digester) u64(v uint64) {
	h := &d.lanes[d.n%digestLanes]
	*h = (*h ^ v) * 0x9e3779b97f4a7c15
	*h ^= *h >> 29
	d.n++
}

func (d *digester) bytes(b []byte) {
	d.u64(uint64(len(b)))
	for len(b) >= 8 {
		d.u64(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	if len(b) > 0 {
		var t [8]byte
		copy(t[:], b)
		d.u64(binary.LittleEndian.Uint64(t[:]))
	}
}

func (d *digester) sum() uint64 {
	h := d.n ^ digestKey
	for _, l := range d.lanes {
		h = mix(h^l, 0xe7037ed1a0b428db)
	}
	return h
}

// header digests a column's own fields and its row count.
func (d *digester) header(c api.WireColumn) {
	d.u64(c.WindowStartMs)
	d.u64(c.StepMs)
	d.u64(uint64(c.Buckets))
	d.u64(uint64(c.WriteWeight))
	d.u64(uint64(c.ReadWeight))
	d.u64(uint64(c.NumRows))
}

// row digests one row, every field.
func (d *digester) row(r *api.WireRow) {
	d.u64(r.RouteID)
	d.u64(r.Reads)
	d.u64(r.Writes)
	d.u64(r.ReadBytes)
	d.u64(r.WriteBytes)
	d.u64(uint64(len(r.Buckets)))
	for _, b := range r.Buckets {
		d.u64(b)
	}
	d.u64(uint64(len(r.TopKeys)))
	for _, k := range r.TopKeys {
		d.bytes(k.Key)
		d.u64(k.Count)
		d.u64(k.Error)
		d.u64(k.SampledReads)
		d.u64(k.SampledWrites)
	}
	d.u64(uint64(r.SampleRate))
	if r.TopKDegraded {
		d.u64(1)
	} else {
		d.u64(0)
	}
	d.u64(uint64(len(r.Samples)))
	for _, s := range r.Samples {
		d.bytes(s.Key)
		d.u64(uint64(s.Reads))
		d.u64(uint64(s.Writes))
	}
	d.u64(r.SampledReads)
	d.u64(r.SampledWrites)
}

// columnDigest is the content digest of an encoded column on its own
// (validation computes the same as it goes), 0 if it does not decode: a
// resend of the same column has the same digest, however it was encoded.
func columnDigest(b []byte) uint64 {
	c, err := api.ReadColumn(b)
	if err != nil {
		return 0
	}
	d := newDigester()
	d.header(c)
	var row api.WireRow
	c.Rows(func(_ int, rb []byte) bool {
		if err = row.Read(rb); err != nil {
			return false
		}
		d.row(&row)
		return true
	})
	if err != nil {
		return 0
	}
	return d.sum()
}

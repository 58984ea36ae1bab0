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
type digester struct{ h uint64 }

func newDigester() digester { return digester{h: digestKey} }

func (d *digester) u64(v uint64) {
	d.h = mix(d.h^v, 0x9e3779b97f4a7c15^digestKey)
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

func (d *digester) sum() uint64 { return mix(d.h, 0xe7037ed1a0b428db) }

// header digests a column's own fields and its row count.
func (d *digester) header(c *api.ReportColumn) {
	d.u64(c.GetWindowStartMs())
	d.u64(c.GetStepMs())
	d.u64(uint64(c.GetBuckets()))
	d.u64(uint64(c.GetWriteWeight()))
	d.u64(uint64(c.GetReadWeight()))
	d.u64(uint64(len(c.GetRows())))
}

// row digests one row, every field.
func (d *digester) row(r *api.ReportRow) {
	d.u64(r.GetRouteId())
	d.u64(r.GetReads())
	d.u64(r.GetWrites())
	d.u64(r.GetReadBytes())
	d.u64(r.GetWriteBytes())
	d.u64(uint64(len(r.GetBuckets())))
	for _, b := range r.GetBuckets() {
		d.u64(b)
	}
	d.u64(uint64(len(r.GetTopKeys())))
	for _, k := range r.GetTopKeys() {
		d.bytes(k.GetKey())
		d.u64(k.GetCount())
		d.u64(k.GetError())
		d.u64(k.GetSampledReads())
		d.u64(k.GetSampledWrites())
	}
	d.u64(uint64(r.GetSampleRate()))
	if r.GetTopKDegraded() {
		d.u64(1)
	} else {
		d.u64(0)
	}
	d.u64(uint64(len(r.GetSamples())))
	for _, s := range r.GetSamples() {
		d.bytes(s.GetKey())
		d.u64(uint64(s.GetReads()))
		d.u64(uint64(s.GetWrites()))
	}
	d.u64(r.GetSampledReads())
	d.u64(r.GetSampledWrites())
}

// columnDigest is the content digest of a column on its own (validation
// computes the same as it goes): a resend of the same column has the same
// digest, however it was encoded.
func columnDigest(c *api.ReportColumn) uint64 {
	d := newDigester()
	d.header(c)
	for _, r := range c.GetRows() {
		d.row(r)
	}
	return d.sum()
}

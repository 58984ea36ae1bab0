package columns

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
	n     uint64 // header words fed: the next one's lane
}

// digestLanes independent chains take the words — the column header's in
// turn, a row's each in a lane fixed by its place (see row) — so that
// words are mixed in parallel rather than each waiting for the previous
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
	*h = mixWord(*h, v)
	d.n++
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

// row digests one row, every field. Each field goes to a lane fixed by
// its place in the row, the lanes held in registers: lengths come before
// the lists they count, so the sequence of (lane, word) a row feeds still
// names its content uniquely. Feeding the words one at a time in turn (a
// lane loaded and stored per word) and copying each key's tail through a
// buffer cost 2 ns a word; this is under 1 ns (BenchmarkRowDigest).
func (d *digester) row(r *api.WireRow) {
	a, b, c, e := d.lanes[0], d.lanes[1], d.lanes[2], d.lanes[3]
	var deg uint64
	if r.TopKDegraded {
		deg = 1
	}
	a, b, c, e = mixWord(a, r.RouteID), mixWord(b, r.Reads), mixWord(c, r.Writes), mixWord(e, r.ReadBytes)
	a, b, c, e = mixWord(a, r.WriteBytes), mixWord(b, uint64(len(r.Buckets))), mixWord(c, uint64(r.SampleRate)), mixWord(e, deg)
	a, b, c, e = mixWord(a, uint64(len(r.TopKeys))), mixWord(b, uint64(len(r.Samples))), mixWord(c, r.SampledReads), mixWord(e, r.SampledWrites)
	bs := r.Buckets
	for len(bs) >= 4 {
		a, b, c, e = mixWord(a, bs[0]), mixWord(b, bs[1]), mixWord(c, bs[2]), mixWord(e, bs[3])
		bs = bs[4:]
	}
	for _, v := range bs {
		a = mixWord(a, v)
	}
	for i := range r.TopKeys {
		k := &r.TopKeys[i]
		a, b = mixKey(a, b, k.Key)
		c, e = mixWord(c, k.Count), mixWord(e, k.Error)
		c, e = mixWord(c, k.SampledReads), mixWord(e, k.SampledWrites)
	}
	ss := r.Samples
	for ; len(ss) >= 2; ss = ss[2:] { // two at a time, in two pairs of lanes
		a, b = mixKey(a, b, ss[0].Key)
		c, e = mixKey(c, e, ss[1].Key)
		a, c = mixWord(a, sampleCounts(ss[0])), mixWord(c, sampleCounts(ss[1]))
	}
	if len(ss) == 1 {
		a, b = mixKey(a, b, ss[0].Key)
		c = mixWord(c, sampleCounts(ss[0]))
	}
	d.lanes = [digestLanes]uint64{a, b, c, e}
}

func sampleCounts(s api.WireSample) uint64 { return uint64(s.Reads)<<32 | uint64(s.Writes) }

func mixWord(h, v uint64) uint64 {
	h = (h ^ v) * 0x9e3779b97f4a7c15
	return h ^ h>>29
}

// mixKey mixes a key's length and bytes into two lanes.
func mixKey(x, y uint64, k []byte) (uint64, uint64) {
	x = mixWord(x, uint64(len(k)))
	for ; len(k) >= 16; k = k[16:] {
		x, y = mixWord(x, binary.LittleEndian.Uint64(k)), mixWord(y, binary.LittleEndian.Uint64(k[8:]))
	}
	if len(k) >= 8 {
		y, k = mixWord(y, binary.LittleEndian.Uint64(k)), k[8:]
	}
	if len(k) > 0 {
		x = mixWord(x, tailWord(k))
	}
	return x, y
}

// tailWord packs 1 to 7 bytes into a word, injectively for each length
// (overlapping loads, as wyhash reads a short input), without copying them
// through a buffer.
func tailWord(k []byte) uint64 {
	l := len(k)
	if l >= 4 {
		return uint64(binary.LittleEndian.Uint32(k)) | uint64(binary.LittleEndian.Uint32(k[l-4:]))<<32
	}
	return uint64(k[0]) | uint64(k[l>>1])<<8 | uint64(k[l-1])<<16
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

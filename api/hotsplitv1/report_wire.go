package hotsplitv1

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// A load report in wire form: ReportRequest, ReportColumn, ReportRow,
// TopKeyCount and SampledKey read straight from their encoding, without
// building messages, for the leader's ingest path. They read exactly what
// proto.Unmarshal would decode — the last of a repeated scalar counts,
// packed and unpacked repeated scalars alike, uint32 fields truncated from
// their varint, a known field with another wire type kept out as unknown,
// unknown fields (groups included) skipped — and refuse exactly what it
// refuses, with ErrMalformedReport. Byte fields alias the input.

// ErrMalformedReport: the bytes are not a ReportRequest protobuf would
// decode.
var ErrMalformedReport = errors.New("malformed report")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedReport, fmt.Sprintf(format, args...))
}

// wireField is one field of a message: its number, type and value (v for
// varints, b for length-delimited fields).
type wireField struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
}

// nextField consumes one field of b; n is its length. One-byte tags and
// varints, nearly all of a report's, take a short path.
func nextField(b []byte) (f wireField, n int, err error) {
	var num protowire.Number
	var typ protowire.Type
	tn := 1
	if t := b[0]; t < 0x80 && t >= 8 {
		num, typ = protowire.Number(t>>3), protowire.Type(t&7)
	} else {
		num, typ, tn = protowire.ConsumeTag(b)
		if tn < 0 || num > protowire.MaxValidNumber {
			return f, 0, malformed("field tag")
		}
	}
	f.num, f.typ = num, typ
	var vn int
	switch typ {
	case protowire.VarintType:
		if len(b) > tn && b[tn] < 0x80 {
			f.v, vn = uint64(b[tn]), 1
		} else {
			f.v, vn = protowire.ConsumeVarint(b[tn:])
		}
	case protowire.BytesType:
		if len(b) > tn && b[tn] < 0x80 && int(b[tn]) <= len(b)-tn-1 {
			m := int(b[tn])
			f.b, vn = b[tn+1:tn+1+m], 1+m
		} else {
			f.b, vn = protowire.ConsumeBytes(b[tn:])
		}
	default:
		vn = protowire.ConsumeFieldValue(num, typ, b[tn:])
	}
	if vn < 0 {
		return f, 0, malformed("field %d", num)
	}
	return f, tn + vn, nil
}

// eachField calls fn for every field of the message b, in order.
func eachField(b []byte, fn func(f wireField) error) error {
	for len(b) > 0 {
		f, n, err := quickField(b)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// ReadReportRequest reads a ReportRequest: its reporter id and the wire
// form of each column, in order.
func ReadReportRequest(b []byte) (reporterID string, columns [][]byte, err error) {
	var id []byte
	err = eachField(b, func(f wireField) error {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			if !utf8.Valid(f.b) {
				return malformed("reporter_id: not valid UTF-8")
			}
			id = f.b
		case f.num == 2 && f.typ == protowire.BytesType:
			columns = append(columns, f.b)
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return string(id), columns, nil
}

// WireColumn is a ReportColumn's own fields and its rows in wire form.
type WireColumn struct {
	WindowStartMs, StepMs            uint64
	Buckets, WriteWeight, ReadWeight uint32
	rows                             []byte // the column's encoding
	NumRows                          int
}

// ReadColumn reads a column's fields; its rows are read with Rows. It does
// not look inside the rows (ReadRow does).
func ReadColumn(b []byte) (WireColumn, error) {
	c := WireColumn{rows: b}
	err := eachField(b, func(f wireField) error {
		if f.typ == protowire.VarintType {
			switch f.num {
			case 1:
				c.WindowStartMs = f.v
			case 2:
				c.StepMs = f.v
			case 3:
				c.Buckets = uint32(f.v)
			case 4:
				c.WriteWeight = uint32(f.v)
			case 5:
				c.ReadWeight = uint32(f.v)
			}
		}
		if f.num == 6 && f.typ == protowire.BytesType {
			c.NumRows++
		}
		return nil
	})
	return c, err
}

// Rows calls fn with each row's encoding, in order, until fn returns
// false. The column was read by ReadColumn, so its fields are well formed.
func (c WireColumn) Rows(fn func(i int, row []byte) bool) {
	i := 0
	for pos := 0; pos < len(c.rows); {
		f, n, err := quickField(c.rows[pos:])
		if err != nil {
			return // ReadColumn checked the fields
		}
		if f.num == 6 && f.typ == protowire.BytesType {
			if !fn(i, f.b) {
				return
			}
			i++
		}
		pos += n
	}
}

// WireRow is a ReportRow read from its wire form. Its slices are reused
// by the next Read; keys alias the input.
type WireRow struct {
	RouteID, Reads, Writes, ReadBytes, WriteBytes uint64
	Buckets                                       []uint64
	TopKeys                                       []WireTopKey
	SampleRate                                    uint32
	TopKDegraded                                  bool
	Samples                                       []WireSample
	SampledReads, SampledWrites                   uint64
}

// WireTopKey is a TopKeyCount read from its wire form.
type WireTopKey struct {
	Key                                       []byte
	Count, Error, SampledReads, SampledWrites uint64
}

// WireSample is a SampledKey read from its wire form.
type WireSample struct {
	Key           []byte
	Reads, Writes uint32
}

// Read reads a row into r, reusing r's slices.
func (r *WireRow) Read(b []byte) error {
	// Field by field, not *r = WireRow{…}: a composite literal stored
	// through the pointer copies the whole struct with write barriers, a
	// tenth of the leader's ingest CPU when it was written that way.
	r.RouteID, r.Reads, r.Writes, r.ReadBytes, r.WriteBytes = 0, 0, 0, 0, 0
	r.SampleRate, r.TopKDegraded, r.SampledReads, r.SampledWrites = 0, false, 0, 0
	r.Buckets, r.TopKeys, r.Samples = r.Buckets[:0], r.TopKeys[:0], r.Samples[:0]
	for len(b) > 0 {
		if num, typ, tn := quickTag(b); tn > 0 {
			switch typ {
			case protowire.VarintType:
				if v, n := quickVarint(b[tn:]); n > 0 {
					r.varint(num, v)
					b = b[tn+n:]
					continue
				}
			case protowire.BytesType:
				if val, n := quickBytes(b[tn:]); n > 0 {
					if err := r.bytes(num, val); err != nil {
						return err
					}
					b = b[tn+n:]
					continue
				}
			}
		}
		f, n, err := nextField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch f.typ {
		case protowire.VarintType:
			r.varint(f.num, f.v)
		case protowire.BytesType:
			if err := r.bytes(f.num, f.b); err != nil {
				return err
			}
		}
	}
	return nil
}

// varint sets the varint field num of a row.
func (r *WireRow) varint(num protowire.Number, v uint64) {
	switch num {
	case 1:
		r.RouteID = v
	case 2:
		r.Reads = v
	case 3:
		r.Writes = v
	case 4:
		r.ReadBytes = v
	case 5:
		r.WriteBytes = v
	case 6:
		r.Buckets = append(r.Buckets, v)
	case 8:
		r.SampleRate = uint32(v)
	case 9:
		r.TopKDegraded = protowire.DecodeBool(v)
	case 41:
		r.SampledReads = v
	case 42:
		r.SampledWrites = v
	}
}

// bytes reads the length-delimited field num of a row.
func (r *WireRow) bytes(num protowire.Number, p []byte) error {
	switch num {
	case 6: // packed: at most one value a byte
		i := len(r.Buckets)
		out := slices.Grow(r.Buckets, len(p))[:i+len(p)]
		for j := 0; j < len(p); {
			// Eight one-byte values at once (most buckets are small).
			if j+8 <= len(p) {
				if w := binary.LittleEndian.Uint64(p[j:]); w&0x8080808080808080 == 0 {
					o := out[i : i+8 : i+8]
					o[0], o[1], o[2], o[3] = w&0xff, w>>8&0xff, w>>16&0xff, w>>24&0xff
					o[4], o[5], o[6], o[7] = w>>32&0xff, w>>40&0xff, w>>48&0xff, w>>56
					i, j = i+8, j+8
					continue
				}
			}
			if c := p[j]; c < 0x80 {
				out[i] = uint64(c)
				i, j = i+1, j+1
				continue
			}
			v, n := protowire.ConsumeVarint(p[j:])
			if n < 0 {
				return malformed("buckets")
			}
			out[i] = v
			i, j = i+1, j+n
		}
		r.Buckets = out[:i]
	case 7:
		r.TopKeys = append(r.TopKeys, WireTopKey{})
		return readTopKey(p, &r.TopKeys[len(r.TopKeys)-1])
	case 40:
		r.Samples = append(r.Samples, WireSample{})
		return readSample(p, &r.Samples[len(r.Samples)-1])
	}
	return nil
}

func readTopKey(b []byte, k *WireTopKey) error {
	for len(b) > 0 {
		num, typ, v, val, n, err := quickOrNext(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			k.Key = val
		case typ != protowire.VarintType:
		case num == 2:
			k.Count = v
		case num == 3:
			k.Error = v
		case num == 40:
			k.SampledReads = v
		case num == 41:
			k.SampledWrites = v
		}
	}
	return nil
}

func readSample(b []byte, s *WireSample) error {
	for len(b) > 0 {
		num, typ, v, val, n, err := quickOrNext(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			s.Key = val
		case typ != protowire.VarintType:
		case num == 2:
			s.Reads = uint32(v)
		case num == 3:
			s.Writes = uint32(v)
		}
	}
	return nil
}

// quickOrNext reads one field of b, the common shapes inline (quickTag,
// quickVarint, quickBytes), the rest through nextField.
func quickOrNext(b []byte) (num protowire.Number, typ protowire.Type, v uint64, val []byte, n int, err error) {
	if num, typ, tn := quickTag(b); tn > 0 {
		switch typ {
		case protowire.VarintType:
			if v, n := quickVarint(b[tn:]); n > 0 {
				return num, typ, v, nil, tn + n, nil
			}
		case protowire.BytesType:
			if val, n := quickBytes(b[tn:]); n > 0 {
				return num, typ, 0, val, tn + n, nil
			}
		}
	}
	f, n, err := nextField(b)
	return f.num, f.typ, f.v, f.b, n, err
}

// quickVarint reads a varint of one or two bytes; n is 0 for anything else.
func quickVarint(b []byte) (v uint64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	if len(b) > 1 && b[1] < 0x80 {
		return uint64(b[0]&0x7f) | uint64(b[1])<<7, 2
	}
	return 0, 0
}

// quickBytes reads a length-delimited value of under 128 bytes; n is 0 for
// anything else.
func quickBytes(b []byte) (val []byte, n int) {
	if len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
		m := int(b[0])
		return b[1 : 1+m], 1 + m
	}
	return nil, 0
}

// quickField is nextField with the common shapes read inline.
func quickField(b []byte) (f wireField, n int, err error) {
	f.num, f.typ, f.v, f.b, n, err = quickOrNext(b)
	return f, n, err
}

// quickTag reads a tag of one or two bytes with a valid field number; tn
// is 0 for anything else (nextField decides).
func quickTag(b []byte) (num protowire.Number, typ protowire.Type, tn int) {
	if t := b[0]; t < 0x80 {
		if t < 8 {
			return 0, 0, 0
		}
		return protowire.Number(t >> 3), protowire.Type(t & 7), 1
	}
	if len(b) < 2 || b[1] >= 0x80 {
		return 0, 0, 0
	}
	v := uint64(b[0]&0x7f) | uint64(b[1])<<7
	if v < 8 {
		return 0, 0, 0
	}
	return protowire.Number(v >> 3), protowire.Type(v & 7), 2
}

// CheckReportRequest reports whether b is a ReportRequest protobuf would
// decode (ErrMalformedReport if not), and returns its reporter id. It
// reads every row; nothing it reads is kept.
func CheckReportRequest(b []byte) (reporterID string, err error) {
	id, cols, err := ReadReportRequest(b)
	if err != nil {
		return "", err
	}
	var r WireRow
	for _, cb := range cols {
		c, err := ReadColumn(cb)
		if err != nil {
			return "", err
		}
		var rowErr error
		c.Rows(func(_ int, row []byte) bool {
			rowErr = r.Read(row)
			return rowErr == nil
		})
		if rowErr != nil {
			return "", rowErr
		}
	}
	return id, nil
}

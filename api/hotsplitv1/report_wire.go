package hotsplitv1

import (
	"errors"
	"fmt"
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
		f, n, err := nextField(b)
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

// Rows calls fn with each row's encoding and where it lies in the column's
// (row == col[off:end] for the bytes ReadColumn was given), in order, until
// fn returns false. The column was read by ReadColumn, so its fields are
// well formed.
func (c WireColumn) Rows(fn func(i int, row []byte, off, end int) bool) {
	i := 0
	for pos := 0; pos < len(c.rows); {
		f, n, err := nextField(c.rows[pos:])
		if err != nil {
			return // ReadColumn checked the fields
		}
		if f.num == 6 && f.typ == protowire.BytesType {
			end := pos + n
			if !fn(i, f.b, end-len(f.b), end) {
				return
			}
			i++
		}
		pos += n
	}
}

// ReadRouteID reads only a row's route id (the last one given, 0 if none)
// from a row that ReadRow accepts.
func ReadRouteID(row []byte) uint64 {
	var id uint64
	eachField(row, func(f wireField) error {
		if f.num == 1 && f.typ == protowire.VarintType {
			id = f.v
		}
		return nil
	})
	return id
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
	*r = WireRow{Buckets: r.Buckets[:0], TopKeys: r.TopKeys[:0], Samples: r.Samples[:0]}
	for len(b) > 0 {
		f, n, err := nextField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch f.typ {
		case protowire.VarintType:
			switch f.num {
			case 1:
				r.RouteID = f.v
			case 2:
				r.Reads = f.v
			case 3:
				r.Writes = f.v
			case 4:
				r.ReadBytes = f.v
			case 5:
				r.WriteBytes = f.v
			case 6:
				r.Buckets = append(r.Buckets, f.v)
			case 8:
				r.SampleRate = uint32(f.v)
			case 9:
				r.TopKDegraded = protowire.DecodeBool(f.v)
			case 41:
				r.SampledReads = f.v
			case 42:
				r.SampledWrites = f.v
			}
		case protowire.BytesType:
			switch f.num {
			case 6: // packed
				for p := f.b; len(p) > 0; {
					if p[0] < 0x80 {
						r.Buckets = append(r.Buckets, uint64(p[0]))
						p = p[1:]
						continue
					}
					v, n := protowire.ConsumeVarint(p)
					if n < 0 {
						return malformed("buckets")
					}
					r.Buckets = append(r.Buckets, v)
					p = p[n:]
				}
			case 7:
				k, err := readTopKey(f.b)
				if err != nil {
					return err
				}
				r.TopKeys = append(r.TopKeys, k)
			case 40:
				s, err := readSample(f.b)
				if err != nil {
					return err
				}
				r.Samples = append(r.Samples, s)
			}
		}
	}
	return nil
}

func readTopKey(b []byte) (k WireTopKey, err error) {
	for len(b) > 0 {
		f, n, err := nextField(b)
		if err != nil {
			return k, err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			k.Key = f.b
		case f.typ != protowire.VarintType:
		case f.num == 2:
			k.Count = f.v
		case f.num == 3:
			k.Error = f.v
		case f.num == 40:
			k.SampledReads = f.v
		case f.num == 41:
			k.SampledWrites = f.v
		}
	}
	return k, nil
}

func readSample(b []byte) (s WireSample, err error) {
	for len(b) > 0 {
		f, n, err := nextField(b)
		if err != nil {
			return s, err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			s.Key = f.b
		case f.typ != protowire.VarintType:
		case f.num == 2:
			s.Reads = uint32(f.v)
		case f.num == 3:
			s.Writes = uint32(f.v)
		}
	}
	return s, nil
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
		c.Rows(func(_ int, row []byte, _, _ int) bool {
			rowErr = r.Read(row)
			return rowErr == nil
		})
		if rowErr != nil {
			return "", rowErr
		}
	}
	return id, nil
}

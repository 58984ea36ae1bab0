package webui

import (
	"strconv"
	"unicode/utf8"
)

// The heatmap answer's JSON, appended by hand: an hour at a 1 s step is a
// million band values, and encoding/json's reflection spent most of the
// answer's time on them. The output is byte for byte what json.Marshal
// makes of a HeatmapAnswer (a property test holds the two equal, so a
// field added to the types without a line here fails it).

// appendHeatmapAnswer appends a's JSON to b. With flush, it hands the
// bytes appended so far to flush between cells (and routes) once they reach flushAt
// and goes on appending to what flush returns: the answer is written as
// it is made, so a client reads the first cells while the last are
// encoded and the node never holds the whole answer's bytes.
func appendHeatmapAnswer(b []byte, a *HeatmapAnswer, flush func([]byte) []byte) []byte {
	b = append(b, `{"read":`...)
	b = appendReadInfo(b, &a.Read)
	b = appendUintField(b, `,"now_ms":`, a.NowMs)
	b = appendStringField(b, `,"metric":`, a.Metric)
	b = appendUintField(b, `,"from_ms":`, a.FromMs)
	b = appendUintField(b, `,"to_ms":`, a.ToMs)
	b = appendStringField(b, `,"start":`, a.Start)
	b = appendStringField(b, `,"end":`, a.End)
	b = appendUintField(b, `,"step":{"ms":`, a.Step.Ms)
	if a.Step.NextMs != 0 {
		b = appendUintField(b, `,"next_ms":`, a.Step.NextMs)
	}
	if a.Step.NextAtMs != 0 {
		b = appendUintField(b, `,"next_at_ms":`, a.Step.NextAtMs)
	}
	b = append(b, `},"history":{"enabled":`...)
	b = strconv.AppendBool(b, a.History.Enabled)
	if a.History.Reason != "" {
		b = appendStringField(b, `,"reason":`, a.History.Reason)
	}
	b = appendUintField(b, `,"from_ms":`, a.History.FromMs)
	b = appendUintField(b, `,"to_ms":`, a.History.ToMs)
	b = appendIntField(b, `,"columns":`, a.History.Columns)
	b = appendIntField(b, `,"marks":`, a.History.Marks)
	b = append(b, `},"keys":`...)
	b = appendStrings(b, a.Keys)
	b = append(b, `,"layouts":`...)
	b = appendStrings(b, a.Layouts)
	b = append(b, `,"cells":`...)
	if a.Cells == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.Cells {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCell(b, &a.Cells[i])
			if flush != nil && len(b) >= flushAt {
				b = flush(b)
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"marks":`...)
	if a.Marks == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.Marks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMark(b, &a.Marks[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"routes":`...)
	if a.Routes == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.Routes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRoute(b, &a.Routes[i])
			if flush != nil && len(b) >= flushAt {
				b = flush(b)
			}
		}
		b = append(b, ']')
	}
	b = appendIntField(b, `,"routes_omitted":`, a.RoutesOmitted)
	b = append(b, `,"switch":`...)
	b = appendSwitch(b, &a.Switch)
	return append(b, '}')
}

// flushAt is how many bytes appendHeatmapAnswer gathers before flushing:
// a cell of 1024 bands is at most ~21 KB, so a buffer of flushAt plus one
// cell rarely grows.
const flushAt = 64 << 10

func appendReadInfo(b []byte, r *ReadInfo) []byte {
	b = appendUintField(b, `{"applied_index":`, r.AppliedIndex)
	b = appendUintField(b, `,"catalog_version":`, r.CatalogVersion)
	b = appendStringField(b, `,"served_by":`, r.ServedBy)
	return append(b, '}')
}

func appendCell(b []byte, c *Cell) []byte {
	b = appendUintField(b, `{"start_ms":`, c.StartMs)
	b = appendUintField(b, `,"end_ms":`, c.EndMs)
	b = appendUintField(b, `,"covered_ms":`, c.CoveredMs)
	b = appendUintField(b, `,"columns":`, c.Columns)
	b = appendIntField(b, `,"layout":`, c.Layout)
	b = append(b, `,"values":`...)
	b = appendUints(b, c.Values)
	return append(b, '}')
}

func appendMark(b []byte, m *Mark) []byte {
	b = appendUintField(b, `{"at_ms":`, m.AtMs)
	b = appendStringField(b, `,"at_hlc":`, m.AtHLC)
	b = appendStringField(b, `,"kind":`, m.Kind)
	b = appendStringField(b, `,"origin":`, m.Origin)
	b = append(b, `,"keys":`...)
	b = appendStrings(b, m.Keys)
	b = append(b, `,"key_lengths":`...)
	b = appendUints(b, m.KeyLengths)
	b = append(b, `,"rows":`...)
	if m.Rows == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, r := range m.Rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(r), 10)
		}
		b = append(b, ']')
	}
	b = appendUintField(b, `,"route_id":`, m.RouteID)
	if m.OpID != 0 {
		b = appendUintField(b, `,"op_id":`, m.OpID)
	}
	return append(b, '}')
}

func appendRoute(b []byte, r *Route) []byte {
	b = appendUintField(b, `{"route_id":`, r.RouteID)
	b = appendStringField(b, `,"start":`, r.Start)
	b = appendStringField(b, `,"end":`, r.End)
	b = appendIntField(b, `,"start_row":`, r.StartRow)
	b = appendIntField(b, `,"end_row":`, r.EndRow)
	b = appendStringField(b, `,"state":`, r.State)
	b = append(b, `,"tracked":`...)
	b = strconv.AppendBool(b, r.Tracked)
	b = appendUintField(b, `,"score":`, r.Score)
	b = appendUintField(b, `,"consecutive_over":`, uint64(r.ConsecutiveOver))
	b = appendUintField(b, `,"cooldown_left_ms":`, r.CooldownLeftMs)
	return append(b, '}')
}

func appendSwitch(b []byte, s *Switch) []byte {
	b = append(b, `{"enabled":`...)
	b = strconv.AppendBool(b, s.Enabled)
	b = appendStringField(b, `,"actor":`, s.Actor)
	b = appendStringField(b, `,"reason":`, s.Reason)
	if s.Note != "" {
		b = appendStringField(b, `,"note":`, s.Note)
	}
	b = appendStringField(b, `,"source":`, s.Source)
	b = appendUintField(b, `,"changed_at_ms":`, s.ChangedAtMs)
	return append(b, '}')
}

func appendUintField(b []byte, name string, v uint64) []byte {
	return strconv.AppendUint(append(b, name...), v, 10)
}

func appendIntField(b []byte, name string, v int) []byte {
	return strconv.AppendInt(append(b, name...), int64(v), 10)
}

func appendStringField(b []byte, name, s string) []byte {
	return appendString(append(b, name...), s)
}

// appendUints appends a JSON array of numbers (null for a nil slice, as
// json.Marshal does).
func appendUints[T uint32 | uint64](b []byte, vs []T) []byte {
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return append(b, ']')
}

func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way json.Marshal does: <, >
// and & escaped (the answer is safe inside HTML too), control characters,
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

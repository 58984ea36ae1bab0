package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// jsonOut is the -o json form: the protobuf JSON mapping with proto field
// names, every field present (so scripts need no defaults), multiline.
var jsonOut = protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true, EmitUnpopulated: true}

// jsonLine is jsonOut on one line, for streams (routes watch).
var jsonLine = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func writeJSON(w io.Writer, m proto.Message) error {
	b, err := jsonOut.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %s as JSON: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeJSONLine(w io.Writer, m proto.Message) error {
	b, err := jsonLine.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %s as JSON: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table is an aligned table: cells separated by tabs, columns padded with
// two spaces, no trailing blanks. Call flush once.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(t.buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, out.String())
	return err
}

// formatHLC renders an HLC as physical.logical plus its UTC wall time; 0
// (never) as "-".
func formatHLC(ts uint64) string {
	if ts == 0 {
		return "-"
	}
	return hlc.Format(ts) + " (" + formatWall(hlc.Physical(ts)) + ")"
}

// formatWall renders a physical time in milliseconds since the epoch, in
// UTC so that every operator reads the same string.
func formatWall(ms uint64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02 15:04:05.000Z")
}

// formatMs renders a duration in milliseconds: exact below a minute, to the
// second above.
func formatMs(ms uint64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Minute {
		d = d.Round(time.Second)
	}
	return d.String()
}

// formatBP renders basis points as a percentage.
func formatBP(bp uint64) string {
	return fmt.Sprintf("%d.%02d%%", bp/100, bp%100)
}

func formatRouteID(id uint64) string {
	if id == 0 {
		return "-"
	}
	return "r" + strconv.FormatUint(id, 10)
}

func formatOpID(id uint64) string {
	if id == 0 {
		return "-"
	}
	return "op" + strconv.FormatUint(id, 10)
}

func formatUint(v uint64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatUint(v, 10)
}

// enumName renders an API enum value in lower_snake without its type
// prefix (REASON_NO_SPLIT_KEY -> no_split_key); a value this build does not
// know (from a newer server) as type(number).
func enumName(e protoreflect.Enum) string {
	d := e.Descriptor()
	v := d.Values().ByNumber(e.Number())
	if v == nil {
		return fmt.Sprintf("%s(%d)", upperSnake(string(d.Name())), e.Number())
	}
	name := string(v.Name())
	name = strings.TrimPrefix(name, upperSnake(string(d.Name()))+"_")
	return strings.ToLower(name)
}

// enumOrDash is enumName, with the zero (unspecified) value shown as "-".
func enumOrDash(e protoreflect.Enum) string {
	if e.Number() == 0 {
		return "-"
	}
	return enumName(e)
}

// upperSnake turns an enum type name into its value prefix:
// SplitOrigin -> SPLIT_ORIGIN.
func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// readInfo says where and at which point of the log a read was served,
// for the footer of a read's output ("" if the server did not say).
func readInfo(r *api.ReadInfo) string {
	if r == nil {
		return ""
	}
	s := enumName(r.GetConsistency()) + " read"
	if r.GetServedBy() != "" {
		s += " by " + r.GetServedBy()
	}
	return s + ", applied index " + strconv.FormatUint(r.GetAppliedIndex(), 10)
}

// withReadInfo appends " (read info)" to a footer when there is any.
func withReadInfo(s string, r *api.ReadInfo) string {
	if info := readInfo(r); info != "" {
		return s + " (" + info + ")"
	}
	return s
}

// routeTable prints routes with the columns every route listing shares.
// FROM and MADE AT say what made a route: the split of a parent ("5"), a
// merge of two routes ("7+8"), or nothing for an initial route ("-").
// PINNED "yes" marks a start boundary an operator placed (cluster version
// 3), which automatic merges keep; a note under the table says so when
// one is shown.
func routeTable(w io.Writer, routes []*api.RouteDescriptor) error {
	t := newTable(w, "ROUTE", "START", "END", "GROUP", "STATE", "FROM", "MADE AT", "PINNED")
	pinned := false
	for _, r := range routes {
		from, at := formatUint(r.GetParentRouteId()), formatHLC(r.GetSplitAtHlc())
		if r.GetMergedAtHlc() != 0 {
			from = strconv.FormatUint(r.GetMergedFromLeft(), 10) + "+" + strconv.FormatUint(r.GetMergedFromRight(), 10)
			at = formatHLC(r.GetMergedAtHlc())
		}
		pin := "-"
		if r.GetOperatorStart() {
			pin, pinned = "yes", true
		}
		t.row(strconv.FormatUint(r.GetRouteId(), 10), formatKey(r.GetStart()), formatEnd(r.GetEnd()),
			strconv.FormatUint(r.GetGroupId(), 10), enumName(r.GetState()), from, at, pin)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if pinned {
		_, err := fmt.Fprintln(w, pinnedNote)
		return err
	}
	return nil
}

// pinnedNote explains PINNED under a route table.
const pinnedNote = "pinned: an operator placed the route's start (a bootstrap split key or a manual split); automatic merges keep it, `hotsplitctl merge` removes it"

// formatKeys renders a list of keys separated by spaces.
func formatKeys(keys [][]byte) string {
	if len(keys) == 0 {
		return "-"
	}
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = formatKey(k)
	}
	return strings.Join(s, " ")
}

// oneLine flattens a server-supplied message so an error stays one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

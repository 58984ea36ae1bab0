package fsm

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// A request id is bound to its request (cluster version 3,
// RequestFingerprints), the idempotency-key rule of Stripe's API: a retry
// of one request gets the first answer; a request id used again for
// another request is refused, never answered with the first request's
// result (which would report success for work never done).
//
// "The same request" is the same command with the same arguments from the
// same actor: the whole command as the leader proposes it, with what may
// differ between two sends of one request cleared: the envelope (the
// leader's hlc stamp, min_version, the request id itself) and the body's
// self-declared note (free text a caller may reword; the actor, the
// authenticated identity, stays). It covers every command generically, so
// a command added later is bound without an edit here.

// retryVaryingFields are the body fields cleared before fingerprinting.
var retryVaryingFields = map[protoreflect.Name]bool{"note": true}

// requestFingerprint is the SHA-256 of cmd's deterministic encoding with
// the envelope and the retry-varying fields cleared.
func requestFingerprint(cmd *api.Command) []byte {
	c := proto.Clone(cmd).(*api.Command)
	c.Hlc, c.MinVersion, c.RequestId = 0, 0, ""
	if body := bodyMessage(c, true); body != nil {
		fields := body.Descriptor().Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); retryVaryingFields[fd.Name()] {
				body.Clear(fd)
			}
		}
	}
	// Commands are decoded strictly (no unknown fields), so the
	// deterministic encoding is a function of the fields alone.
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		// A command that decoded marshals; say so rather than bind to nothing.
		panic(fmt.Sprintf("fsm: marshal a decoded command: %v", err))
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// bodyMessage is the message set in cmd's body oneof, nil if none;
// mutable for a caller that changes it.
func bodyMessage(cmd *api.Command, mutable bool) protoreflect.Message {
	m := cmd.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("body"))
	if fd == nil || fd.Message() == nil {
		return nil
	}
	if mutable {
		return m.Mutable(fd).Message()
	}
	return m.Get(fd).Message()
}

// maxRequestDescription bounds the words kept for a request (replicated
// state, one per request id in the table).
const maxRequestDescription = 200

// describeRequest says in words what cmd asks, for the refusal of a reused
// request id: the commands operators send by hand in their own terms, any
// other as its kind and fields. Deterministic (replicated state).
func describeRequest(cmd *api.Command) string {
	var d string
	switch b := cmd.GetBody().(type) {
	case *api.Command_SplitRange:
		s := b.SplitRange
		d = fmt.Sprintf("split r%d at %s", s.GetRouteId(), quoteKey(s.GetSplitKey()))
		if s.ExpectedVersion != nil {
			d += fmt.Sprintf(" if the catalog is at version %d", s.GetExpectedVersion())
		}
	case *api.Command_MergeRange:
		m := b.MergeRange
		d = fmt.Sprintf("merge r%d and r%d", m.GetLeftRouteId(), m.GetRightRouteId())
		if m.ExpectedVersion != nil {
			d += fmt.Sprintf(" if the catalog is at version %d", m.GetExpectedVersion())
		}
	case *api.Command_SetAutoSplit:
		verb := "disable"
		if b.SetAutoSplit.GetEnabled() {
			verb = "enable"
		}
		d = fmt.Sprintf("autosplit %s (reason %s)", verb, quoteText(b.SetAutoSplit.GetReason()))
	case *api.Command_SetConfig:
		d = "config set " + fieldText(b.SetConfig.GetPatch().ProtoReflect(), " ")
	case *api.Command_AbortOp:
		d = fmt.Sprintf("abort op%d", b.AbortOp.GetOpId())
		if r := b.AbortOp.GetReason(); r != "" {
			d += " (reason " + quoteText(r) + ")"
		}
	default:
		d = commandKind(cmd)
		if body := bodyMessage(cmd, false); body != nil {
			if f := fieldText(body, " "); f != "" {
				d += " " + f
			}
		}
	}
	if actor := actorOf(cmd); actor != "" {
		d += " by " + actor
	}
	return truncateText(d, maxRequestDescription)
}

// actorOf is the body's actor field, "" if it has none.
func actorOf(cmd *api.Command) string {
	body := bodyMessage(cmd, false)
	if body == nil {
		return ""
	}
	fd := body.Descriptor().Fields().ByName("actor")
	if fd == nil || fd.Kind() != protoreflect.StringKind {
		return ""
	}
	return body.Get(fd).String()
}

// fieldText renders the set fields of m as name=value in field order
// (actor and note left out: the description names the actor itself),
// nested messages in braces, keys and text quoted.
func fieldText(m protoreflect.Message, sep string) string {
	var parts []string
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) || fd.Name() == "actor" || retryVaryingFields[fd.Name()] {
			continue
		}
		parts = append(parts, string(fd.Name())+"="+valueText(fd, m.Get(fd)))
	}
	return strings.Join(parts, sep)
}

func valueText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	if fd.IsList() {
		l := v.List()
		items := make([]string, 0, l.Len())
		for i := range l.Len() {
			items = append(items, scalarText(fd, l.Get(i)))
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	if fd.IsMap() {
		return "{…}" // no command has a map; keep the text deterministic if one does
	}
	return scalarText(fd, v)
}

func scalarText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "{" + fieldText(v.Message(), " ") + "}"
	case protoreflect.BytesKind:
		return quoteKey(v.Bytes())
	case protoreflect.StringKind:
		return quoteText(v.String())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	}
	return fmt.Sprint(v.Interface())
}

// quoteKey quotes a key, shortened to 48 bytes.
func quoteKey(k []byte) string {
	const most = 48
	if len(k) > most {
		return strconv.Quote(string(k[:most])) + "…"
	}
	return strconv.Quote(string(k))
}

func quoteText(s string) string { return strconv.Quote(truncateText(s, 64)) }

// truncateText cuts s to at most n bytes at a rune boundary, marking the
// cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// checkRequestBinding: a restored record is bound (a fingerprint of
// SHA-256's size with a description within its bound) or unbound (neither,
// as every record written below version 3 is); no replica below version 3
// writes a bound one.
func checkRequestBinding(r *api.RequestRecord, version uint32) error {
	fp, d := r.GetFingerprint(), r.GetDescription()
	switch {
	case len(fp) == 0 && d == "":
		return nil
	case !clusterversion.RequestFingerprints.EnabledAt(version):
		return fmt.Errorf("id %q: a fingerprint, a setting of cluster version %d, at cluster version %d", r.GetRequestId(), clusterversion.RequestFingerprints.Version(), version)
	case len(fp) != sha256.Size || d == "" || len(d) > maxRequestDescription || !utf8.ValidString(d):
		return fmt.Errorf("id %q: fingerprint of %d bytes (want %d) or description of %d bytes (want 1 to %d of UTF-8)", r.GetRequestId(), len(fp), sha256.Size, len(d), maxRequestDescription)
	}
	return nil
}

// reusedRequest is the refusal of a request id used for another request:
// nothing applies and the id keeps its first request.
func reusedRequest(rid string, first *api.RequestRecord, cmd *api.Command) *api.CommandResult {
	return fail(api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED,
		"request id %s was used for %s; this request (%s) is another one and was not applied: send it with a new request id",
		rid, first.GetDescription(), describeRequest(cmd))
}

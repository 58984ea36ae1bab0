package webui

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// The hand-written encoder makes exactly json.Marshal's bytes for any
// answer: rapid fills every field (a field added to the types and not to
// the encoder fails here), nil and empty slices included.
func TestHeatmapAnswerEncodesAsJSONMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Make[HeatmapAnswer]().Draw(t, "answer")
		want, err := json.Marshal(&a)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendHeatmapAnswer(nil, &a, nil); !bytes.Equal(got, want) {
			t.Fatalf("hand-encoded\n%s\njson.Marshal\n%s", got, want)
		}
		// Flushed in pieces, the same bytes.
		var chunks []byte
		rest := appendHeatmapAnswer(nil, &a, func(b []byte) []byte {
			chunks = append(chunks, b...)
			return b[:0]
		})
		if got := append(chunks, rest...); !bytes.Equal(got, want) {
			t.Fatalf("flushed\n%s\njson.Marshal\n%s", got, want)
		}
	})
}

// FuzzAppendString: strings in an answer (switch reasons, actors, route
// states) can hold any bytes; they are escaped exactly as json.Marshal
// escapes them (invalid UTF-8 as U+FFFD, <, >, &, U+2028 and U+2029 as
// \u escapes).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<script>\"x\"</script>&", "\x00\x01\x1f\x7f\b\f\n\r\t\\", "é\u2028\u2029\xff\xc3", string(hostile)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := appendString([]byte("x"), s)
		if !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("%q: appendString %s, json.Marshal %s", s, got, want)
		}
	})
}

// An answer larger than flushAt leaves in several pieces that together
// are json.Marshal's bytes: an hour of 1000 routes at the 60 s step.
func TestLargeHeatmapAnswerFlushesInPieces(t *testing.T) {
	const now = 1_700_000_000_000
	h, cat := history1h1000Routes(t, 60_000, now)
	a, err := buildHeatmap(&Snapshot{Read: &api.ReadInfo{ServedBy: "n1"}, NowMs: now, History: h, Catalog: cat,
		Config: &api.Config{StepMs: 60_000}, Switch: &api.AutoSplitSwitch{Enabled: true}}, HeatmapParams{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []byte
	flushes := 0
	rest := appendHeatmapAnswer(nil, a, func(b []byte) []byte {
		flushes++
		chunks = append(chunks, b...)
		return b[:0]
	})
	if got := append(chunks, rest...); !bytes.Equal(got, want) || flushes < len(want)/(2*flushAt) {
		t.Fatalf("%d bytes in %d flushes of at least %d, json.Marshal %d bytes; equal: %v", len(got), flushes, flushAt, len(want), bytes.Equal(got, want))
	}
}

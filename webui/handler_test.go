package webui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/hlc"
)

func serve(t *testing.T, src Source, method, target string) *http.Response {
	t.Helper()
	mux := http.NewServeMux()
	New(src).Register(mux, nil)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkSecure(t *testing.T, r *http.Response, what string) {
	t.Helper()
	if got := r.Header.Get("Content-Security-Policy"); got != "default-src 'self'" {
		t.Errorf("%s: CSP %q", what, got)
	}
	if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q", what, got)
	}
}

func TestPageAndAssets(t *testing.T) {
	src := newFakeSource(t)
	tests := []struct {
		method, target string
		code           int
		typ            string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/assets/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/assets/app.css", 200, "text/css; charset=utf-8"},
		{"GET", "/assets/index.html", 404, "text/plain; charset=utf-8"},
		{"GET", "/assets/../doc.go", 307, ""}, // the mux cleans the path: /doc.go, not the UI's
		{"GET", "/assets/", 404, ""},
		{"GET", "/other", 404, ""}, // the page is /{$} only
		{"POST", "/", 405, ""},
		{"POST", "/api/v1/heatmap", 405, ""},
	}
	for _, tc := range tests {
		r := serve(t, src, tc.method, tc.target)
		if r.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.target, r.StatusCode, tc.code)
		}
		if tc.typ != "" && r.Header.Get("Content-Type") != tc.typ {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.target, r.Header.Get("Content-Type"), tc.typ)
		}
		if tc.code == 200 {
			checkSecure(t, r, tc.target)
		}
	}
}

// The page loads only its own assets: no inline script, style or event
// handler (the CSP would block them anyway), no other origin; and the
// script never turns text into HTML.
func TestPageHasNoInlineCodeAndScriptNoHTMLSinks(t *testing.T) {
	page, _ := assets.ReadFile("assets/index.html")
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(\s[^>]*)?>[^<]`),          // a script with a body
		regexp.MustCompile(`<script(?:\s(?:[^s>]|s[^r])*)?>`), // a script without src
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`(?i)(src|href)="(https?:)?//`),
	} {
		if loc := bad.FindIndex(page); loc != nil {
			t.Errorf("index.html: %q matches %s", page[loc[0]:loc[1]], bad)
		}
	}
	js, _ := assets.ReadFile("assets/app.js")
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
		"setAttribute('style'", "http://", "https://", "import("} {
		if bytes.Contains(js, []byte(sink)) {
			t.Errorf("app.js uses %s", sink)
		}
	}
	for _, id := range []string{`id="banner"`, `id="tooltip"`, `id="heatmap"`, `id="explain"`, `id="legend-scale"`, `id="mark-legend"`} {
		if !bytes.Contains(page, []byte(id)) {
			t.Errorf("index.html lacks %s (browser tests find the page by these ids)", id)
		}
	}
}

func getJSON(t *testing.T, src Source, target string, v any) []byte {
	t.Helper()
	r := serve(t, src, "GET", target)
	b := body(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", target, r.StatusCode, b)
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET %s: Content-Type %q, Cache-Control %q", target, r.Header.Get("Content-Type"), r.Header.Get("Cache-Control"))
	}
	checkSecure(t, r, target)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return b
}

func TestHeatmapAnswer(t *testing.T) {
	src := newFakeSource(t)
	var a HeatmapAnswer
	getJSON(t, src, "/api/v1/heatmap", &a)
	if a.Read != (ReadInfo{AppliedIndex: 42, CatalogVersion: 1, ServedBy: "n1"}) || a.NowMs != fakeNowMs || a.Metric != "weighted" {
		t.Fatalf("read %+v now %d metric %s", a.Read, a.NowMs, a.Metric)
	}
	// Defaults: the hour before the newest column (now here).
	if a.ToMs != fakeNowMs || a.FromMs != fakeNowMs-3_600_000 || a.Step.Ms != 10_000 {
		t.Fatalf("range [%d, %d], step %d", a.FromMs, a.ToMs, a.Step.Ms)
	}
	if !a.History.Enabled || a.History.Columns != 12 || a.History.Marks != 1 || a.History.ToMs != fakeNowMs {
		t.Fatalf("history %+v", a.History)
	}
	esc := catalog.EscapeKey(hostile)
	wantKeys := []string{"", "0", catalog.EscapeKey([]byte("<")), esc + `\x00`}
	if !slices.Equal(a.Keys, wantKeys) {
		t.Fatalf("keys %q, want %q", a.Keys, wantKeys)
	}
	if len(a.Cells) != 12 {
		t.Fatalf("%d cells", len(a.Cells))
	}
	c := a.Cells[11]
	// Route 3 is the isolated hostile key: weighted = reads + writes.
	if !slices.Equal(a.Rows(11), []uint32{0, 1, 2, 3}) || !slices.Equal(c.Values, []uint64{11, 0, 5111, 0}) || c.CoveredMs != 10_000 || c.Columns != 1 {
		t.Fatalf("last cell %+v", c)
	}
	if len(a.Marks) != 1 {
		t.Fatalf("marks %+v", a.Marks)
	}
	m := a.Marks[0]
	if m.Kind != "split" || m.Origin != "ISOLATION_COMPOUND" || !slices.Equal(m.Keys, []string{esc, esc + `\x00`}) ||
		!slices.Equal(m.Rows, []int{2, 3}) || m.OpID != 7 || m.AtMs != fakeNowMs-60_000 || m.AtHLC != fmt.Sprint(hlc.Make(fakeNowMs-60_000, 0)) {
		t.Fatalf("mark %+v", m)
	}
	if len(a.Routes) != 4 || a.RoutesOmitted != 0 {
		t.Fatalf("routes %+v", a.Routes)
	}
	hot := a.Routes[2]
	if hot.Start != esc || hot.End != esc+`\x00` || hot.StartRow != 2 || hot.EndRow != 3 || !hot.Tracked ||
		hot.Score != 30_600 || hot.ConsecutiveOver != 3 || hot.CooldownLeftMs != 45_000 || hot.State != "ACTIVE" {
		t.Fatalf("hot route %+v", hot)
	}
	if last := a.Routes[3]; last.End != "" || last.EndRow != 4 || last.Tracked {
		t.Fatalf("last route %+v", last)
	}
	if a.Switch.Enabled || a.Switch.Actor != "admin:ops" || a.Switch.Reason != "<b>maintenance</b>" || a.Switch.Source != "OPERATOR" ||
		a.Switch.ChangedAtMs != fakeNowMs-5000 {
		t.Fatalf("switch %+v", a.Switch)
	}
}

func TestHeatmapQueryNarrows(t *testing.T) {
	src := newFakeSource(t)
	var a HeatmapAnswer
	q := url.Values{"from": {fmt.Sprint(fakeNowMs - 30_000)}, "to": {fmt.Sprint(fakeNowMs)}, "metric": {"bytes"},
		"start": {"0"}, "end": {catalog.EscapeKey(hostile) + `\x00`}}
	getJSON(t, src, "/api/v1/heatmap?"+q.Encode(), &a)
	// The three columns ending after from (one ending at from has no time in the range).
	if a.Metric != "bytes" || a.Start != "0" || len(a.Cells) != 3 {
		t.Fatalf("metric %s start %q cells %d", a.Metric, a.Start, len(a.Cells))
	}
	if !slices.Equal(a.Keys, []string{"0", `<`}) || !slices.Equal(a.Cells[2].Values, []uint64{0, 1 << 20}) {
		t.Fatalf("keys %q values %v", a.Keys, a.Cells[2].Values)
	}
	if len(a.Routes) != 2 || a.Routes[0].Start != "0" {
		t.Fatalf("routes %+v", a.Routes)
	}
}

// Hostile key bytes reach the browser only escaped, inside JSON strings,
// and the escaped form reads back to the same bytes.
func TestHostileKeysLeaveEscaped(t *testing.T) {
	src := newFakeSource(t)
	for _, target := range []string{"/api/v1/heatmap", "/api/v1/decisions", "/api/v1/explain?route=3"} {
		var v map[string]any
		raw := getJSON(t, src, target, &v)
		for _, bad := range []string{"<script", "<b>", "\x00", "\xff", "'&"} {
			if bytes.Contains(raw, []byte(bad)) {
				t.Errorf("%s: the answer holds %q raw", target, bad)
			}
		}
	}
	var a HeatmapAnswer
	getJSON(t, src, "/api/v1/heatmap", &a)
	k, err := catalog.UnescapeKey(a.Routes[2].Start)
	if err != nil || !bytes.Equal(k, hostile) {
		t.Fatalf("the escaped key reads back to %q, %v", k, err)
	}
}

func TestBadQueries(t *testing.T) {
	src := newFakeSource(t)
	tests := []struct {
		target string
		want   string
	}{
		{"/api/v1/heatmap?from=x", "parameter from:"},
		{"/api/v1/heatmap?to=-1", "parameter to:"},
		{"/api/v1/heatmap?from=5&to=4", "parameter from: 5 is after to 4"},
		{"/api/v1/heatmap?from=" + fmt.Sprint(fakeNowMs+1), "parameter from:"}, // after the default to
		{"/api/v1/heatmap?metric=latency", `parameter metric: "latency"`},
		{"/api/v1/heatmap?start=%5Cq", `parameter start: unknown escape \q`},
		{"/api/v1/heatmap?end=a&start=b", "parameter end:"},
		{"/api/v1/heatmap?end=a&start=a", "parameter end:"},
		{"/api/v1/heatmap?start=" + strings.Repeat("k", 4098), "parameter start: 4098 bytes"},
		{"/api/v1/heatmap?cells=0", "parameter cells:"},
		{"/api/v1/heatmap?cells=1501", "parameter cells:"},
		{"/api/v1/heatmap?metric=reads&metric=writes", "parameter metric: given 2 times"},
		{"/api/v1/heatmap?form=1", `parameter "form": unknown parameter`},
		{"/api/v1/heatmap?from=%zz", "query:"},
		{"/api/v1/heatmap?a;b", "query:"},
		{"/api/v1/decisions?from=2&to=1", "parameter from:"},
		{"/api/v1/decisions?route=1", `parameter "route": unknown`},
		{"/api/v1/explain", "parameter route: required"},
		{"/api/v1/explain?route=0", "parameter route:"},
		{"/api/v1/explain?route=r3", "parameter route:"},
	}
	for _, tc := range tests {
		r := serve(t, src, "GET", tc.target)
		b := string(body(t, r))
		if r.StatusCode != 400 || !strings.Contains(b, tc.want) {
			t.Errorf("GET %s: %d %q, want 400 naming %q", tc.target, r.StatusCode, b, tc.want)
		}
		if r.Header.Get("Content-Type") != "text/plain; charset=utf-8" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: error served as %q", tc.target, r.Header.Get("Content-Type"))
		}
	}
	if src.explained != 0 {
		t.Fatal("a refused explain reached the source")
	}
}

func TestSourceErrors(t *testing.T) {
	tests := []struct {
		snapErr, explainErr error
		target              string
		code                int
	}{
		{fmt.Errorf("not bootstrapped: %w", ErrUnavailable), nil, "/api/v1/heatmap", 503},
		{fmt.Errorf("not bootstrapped: %w", ErrUnavailable), nil, "/api/v1/decisions", 503},
		{errors.New("disk on fire"), nil, "/api/v1/heatmap", 500},
		{nil, fmt.Errorf("route 99 was never created: %w", ErrNotFound), "/api/v1/explain?route=99", 404},
		{nil, fmt.Errorf("stopping: %w", ErrUnavailable), "/api/v1/explain?route=2", 503},
	}
	for _, tc := range tests {
		src := newFakeSource(t)
		src.err, src.explainErr = tc.snapErr, tc.explainErr
		r := serve(t, src, "GET", tc.target)
		if r.StatusCode != tc.code {
			t.Errorf("%s with %v/%v: %d, want %d", tc.target, tc.snapErr, tc.explainErr, r.StatusCode, tc.code)
		}
	}
}

func TestDecisionsAnswer(t *testing.T) {
	src := newFakeSource(t)
	var a DecisionsAnswer
	getJSON(t, src, "/api/v1/decisions", &a)
	if len(a.Decisions) != 2 || a.Kept != 2 || a.Read.AppliedIndex != 42 {
		t.Fatalf("%+v", a)
	}
	d := a.Decisions[0]
	esc := catalog.EscapeKey(hostile)
	if d.Kind != "PLANNED" || d.Origin != "ISOLATION_COMPOUND" || d.Reason != "PLANNED" || d.OpID != 7 ||
		!slices.Equal(d.SplitKeys, []string{esc, esc + `\x00`}) || d.AtMs != fakeNowMs-90_000 {
		t.Fatalf("decision %+v", d)
	}
	getJSON(t, src, fmt.Sprintf("/api/v1/decisions?from=%d", fakeNowMs-10_000), &a)
	if len(a.Decisions) != 1 || a.Decisions[0].Kind != "SWITCH" {
		t.Fatalf("from a time: %+v", a.Decisions)
	}
	getJSON(t, src, fmt.Sprintf("/api/v1/decisions?to=%d", fakeNowMs-90_000), &a)
	if len(a.Decisions) != 1 || a.Decisions[0].Seq != 1 {
		t.Fatalf("to a time (included): %+v", a.Decisions)
	}
}

func TestExplainAnswer(t *testing.T) {
	src := newFakeSource(t)
	var a ExplainAnswer
	getJSON(t, src, "/api/v1/explain?route=3", &a)
	esc := catalog.EscapeKey(hostile)
	if src.explained != 3 || a.RouteID != 3 || a.Route == nil || a.Route.Start != esc || a.Route.End != esc+`\x00` || a.Route.State != "ACTIVE" {
		t.Fatalf("route %+v", a.Route)
	}
	if a.Tracked == nil || a.Tracked.ConsecutiveOver != 3 || a.Tracked.CooldownLeftMs != 45_000 || a.Tracked.RecentScores == nil {
		t.Fatalf("tracked %+v", a.Tracked)
	}
	if len(a.Ops) != 1 || a.Ops[0].State != "DONE" || !slices.Equal(a.Ops[0].SplitKeys, []string{esc}) || len(a.Decisions) != 1 {
		t.Fatalf("ops %+v decisions %+v", a.Ops, a.Decisions)
	}
	getJSON(t, src, "/api/v1/explain?route=1", &a)
	if a.Tracked != nil || a.Route == nil {
		t.Fatalf("a cold route: %+v", a)
	}
}

// Below cluster version 3 there is no history: the answer says so and
// holds no cell, but still the routes and the switch.
func TestHeatmapWithoutHistory(t *testing.T) {
	src := newFakeSource(t)
	src.snap.History = nil
	var a HeatmapAnswer
	getJSON(t, src, "/api/v1/heatmap", &a)
	if a.History.Enabled || len(a.Cells) != 0 || len(a.Marks) != 0 || !slices.Equal(a.Keys, []string{""}) || len(a.Routes) != 4 {
		t.Fatalf("%+v", a)
	}
}

// The node wraps every endpoint (authentication, roles): Register applies
// the wrapper to all of them, the page and assets included.
func TestRegisterWrapsEveryEndpoint(t *testing.T) {
	mux := http.NewServeMux()
	h := New(newFakeSource(t))
	h.Register(mux, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusUnauthorized) })
	})
	for _, e := range h.Endpoints() {
		target := strings.TrimPrefix(e.Pattern, "GET ")
		target = strings.NewReplacer("{$}", "", "{name}", "app.js").Replace(target)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("GET %s (%s): %d, not wrapped", target, e.Pattern, rec.Code)
		}
	}
}

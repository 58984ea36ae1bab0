package webui

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/browsertest"
)

// pageBounds are the bounds docs/benchmarks.md states for an hour of 1000
// routes, at the 60 s step and at --dev's 1 s step (994 kept columns of
// 1000 bands: a million band values, a 4.9 MB answer): the API in 100 ms
// and the page in 1 s.
var pageBounds = []struct {
	stepMs      uint64
	api, render time.Duration
}{
	{60_000, 100 * time.Millisecond, time.Second},
	{1000, 100 * time.Millisecond, time.Second},
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestLongPageRenders1h1000Routes (long suite, docs/benchmarks.md): an
// hour of 1000 loaded routes with marks, at the 60 s and the 1 s step.
// The API answers the whole hour (every column kept) and headless
// Chromium renders the page — navigation to the end of the first paint
// that draws a mark — within pageBounds; medians of 5.
func TestLongPageRenders1h1000Routes(t *testing.T) {
	if os.Getenv("HOTSPLIT_LONG") == "" {
		t.Skip("long suite: set HOTSPLIT_LONG=1 (.ci/run long)")
	}
	ctx := browsertest.Start(t, browsertest.Options{})
	for _, b := range pageBounds {
		stepMs := b.stepMs
		t.Run(fmt.Sprintf("step=%dms", stepMs), func(t *testing.T) {
			now := uint64(time.Now().UnixMilli()) / stepMs * stepMs
			h, cat := history1h1000Routes(t, stepMs, now)
			src := &fakeSource{snap: &Snapshot{Read: &api.ReadInfo{ServedBy: "n1"}, NowMs: now, History: h, Catalog: cat,
				Config: &api.Config{StepMs: stepMs}, Switch: &api.AutoSplitSwitch{Enabled: true}}}
			mux := http.NewServeMux()
			New(src).Register(mux, nil)
			srv := httptest.NewServer(mux)
			defer srv.Close()

			var api []time.Duration
			var size int64
			for range 5 {
				t0 := time.Now()
				resp, err := http.Get(fmt.Sprintf("%s/api/v1/heatmap?from=%d&to=%d", srv.URL, now-3_600_000, now))
				if err != nil {
					t.Fatal(err)
				}
				size, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				api = append(api, time.Since(t0))
			}
			var render []time.Duration
			for range 5 {
				if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
					t.Fatal(err)
				}
				ms, err := chromedp.Run(ctx, chromedp.Poll[float64](`window.hotsplitView && window.hotsplitView.marks.length > 0 && window.hotsplitView.paintedAtMs`,
					chromedp.WithPollingTimeout(30*time.Second)))
				if err != nil {
					t.Fatal(err)
				}
				render = append(render, time.Duration(ms*float64(time.Millisecond)))
			}
			t.Logf("API: %d bytes, median %v of %v; page: median %v of %v", size, median(api), api, median(render), render)
			if m := median(api); m > b.api {
				t.Errorf("the API took %v (median), bound %v", m, b.api)
			}
			if m := median(render); m > b.render {
				t.Errorf("the page took %v (median) to paint a mark, bound %v", m, b.render)
			}
		})
	}
}

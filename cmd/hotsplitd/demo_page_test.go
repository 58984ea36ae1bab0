package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/browsertest"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// pagePoint is where the page painted the hot route: its row's middle in
// the cell where its band is hottest (after the isolation mark, when there
// is one), in CSS pixels of the canvas, the colour there, and the
// isolation mark at the hot key.
type pagePoint struct {
	Err     string     `json:"err"`
	X       float64    `json:"x"`
	Y       float64    `json:"y"`
	PageX   float64    `json:"page_x"`
	PageY   float64    `json:"page_y"`
	RGB     [3]int     `json:"rgb"`
	Mark    bool       `json:"mark"`
	MarkRGB [][3]int   `json:"mark_rgb"`
	MarkXY  [2]float64 `json:"mark_xy"`
	Paints  int        `json:"paints"`
	NavType string     `json:"nav_type"`
	Path    string     `json:"path"`
}

// hotPointJS finds pagePoint in window.hotsplitView; %q is the hot key
// in the escaped key format the API uses.
const hotPointJS = `(() => {
  const hot = %q;
  const v = window.hotsplitView;
  const nav = performance.getEntriesByType('navigation')[0];
  const out = { paints: v ? v.paints : 0, nav_type: nav ? nav.type : '', path: location.pathname };
  if (!v) return Object.assign(out, { err: 'nothing painted yet' });
  const r = v.routes.find((r) => r.start === hot);
  if (!r) return Object.assign(out, { err: 'no route starts at the hot key: ' + JSON.stringify(v.routes.map((r) => r.start)) });
  // After the isolation when there is one: the isolated route's own band.
  const m = v.marks.find((m) => m.kind === 'split' && m.origin === 'ISOLATION_COMPOUND' && m.keys[0] === hot);
  let best = null;
  for (const c of v.cells) {
    if (m && c.endMs <= m.atMs) continue;
    const b = c.bands.find((b) => r.startRow >= b.row0 && r.startRow < b.row1);
    // Inside the plot: the newest cell may end at its right edge.
    const x = Math.min((c.x0 + c.x1) / 2, v.plot.left + v.plot.width - 1);
    if (b && (!best || b.rate > best.rate)) best = { rate: b.rate, x: x };
  }
  if (!best) return Object.assign(out, { err: 'no cell has the hot route band' });
  const canvas = document.getElementById('heatmap');
  const rect = canvas.getBoundingClientRect();
  const dpr = canvas.width / rect.width;
  const g = canvas.getContext('2d');
  const px = (x, y) => Array.from(g.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data.slice(0, 3));
  const y = (r.y0 + r.y1) / 2;
  Object.assign(out, { x: best.x, y: y, page_x: rect.left + best.x, page_y: rect.top + y, rgb: px(best.x, y) });
  if (m) {
    out.mark = true;
    out.mark_xy = [m.x, (m.y0 + m.y1) / 2];
    out.mark_rgb = [];
    for (let dx = -2; dx <= 2; dx++) out.mark_rgb.push(px(m.x + dx, (m.y0 + m.y1) / 2));
  }
  return out;
})()`

// Background colours of app.js (PLOT_BG, PAGE_BG) and the colour of an
// ISOLATION_COMPOUND mark.
var (
	plotBG   = [3]int{0x11, 0x11, 0x18}
	pageBG   = [3]int{0x0d, 0x0d, 0x12}
	isoColor = [3]int{0xff, 0x40, 0x81}
)

func near(a, b [3]int, tol int) bool {
	for i := range a {
		if d := a[i] - b[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

// checkDemoPage opens the demo's login URL in headless Chromium and checks
// the page as an operator would see it: reached without a reload, the hot
// key's band painted, the isolation mark drawn at the hot key, the tooltip
// naming the isolated route's id and range, the switch's banner flipping
// when automatic splitting is disabled. The demo CA is trusted by this
// browser only (a fresh profile that ignores certificate errors).
func checkDemoPage(t *testing.T, login string, hot []byte, routeID string, ctl func(args ...string) (string, error)) {
	ctx := browsertest.Start(t, browsertest.Options{IgnoreCertificateErrors: true})
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	u, err := url.Parse(login)
	if err != nil || u.Path != "/login" {
		t.Fatalf("login URL %q: %v", login, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(login)); err != nil {
		t.Fatal(err)
	}
	hotKey := catalog.EscapeKey(hot)
	var p pagePoint
	testutil.Eventually(t, 60*time.Second, "the hot key's band and its isolation mark painted", func() error {
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](fmt.Sprintf(hotPointJS, hotKey)))
		if err != nil {
			return err
		}
		p = pagePoint{}
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("%w: %s", err, raw)
		}
		switch {
		case p.Path != "/" || p.NavType != "navigate":
			return fmt.Errorf("on %q after a %q: want / reached by the login's redirect, no reload", p.Path, p.NavType)
		case p.Err != "":
			return fmt.Errorf("%s (paints %d)", p.Err, p.Paints)
		case near(p.RGB, plotBG, 2) || near(p.RGB, pageBG, 2):
			return fmt.Errorf("background colour %v at the hot band (%.0f, %.0f)", p.RGB, p.X, p.Y)
		case !p.Mark:
			return fmt.Errorf("no isolation mark at %q", hotKey)
		}
		for _, c := range p.MarkRGB {
			if near(c, isoColor, 70) {
				return nil
			}
		}
		return fmt.Errorf("no mark colour around the isolation mark at %v: %v", p.MarkXY, p.MarkRGB)
	})

	// Hovering the hot band names the isolated route.
	wantRoute := fmt.Sprintf(`route r%s ["%s", "%s")`, routeID, hotKey, catalog.EscapeKey(append([]byte(string(hot)), 0)))
	testutil.Eventually(t, 30*time.Second, "the tooltip naming the isolated route", func() error {
		// Where the band is now (the time axis moves), approached from a
		// pixel away so the browser sees the pointer move.
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](fmt.Sprintf(hotPointJS, hotKey)))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &p); err != nil || p.Err != "" {
			return fmt.Errorf("%v %s", err, p.Err)
		}
		if err := chromedp.Do(ctx, chromedp.MouseEvent(chromedp.MouseMoved, p.PageX-1, p.PageY-1),
			chromedp.MouseEvent(chromedp.MouseMoved, p.PageX, p.PageY)); err != nil {
			return err
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('tooltip').hidden ? '(hidden)' : document.getElementById('tooltip-route').textContent`))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(got, wantRoute) {
			return fmt.Errorf("tooltip route %q, want %q", got, wantRoute)
		}
		return nil
	})
	if path := os.Getenv("HOTSPLIT_DEMO_SCREENSHOT"); path != "" {
		demoScreenshot(t, ctx, path, hotKey)
	}

	// The banner follows the switch.
	banner := func() (string, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('banner').dataset.enabled`))
	}
	testutil.Eventually(t, 20*time.Second, "the banner showing automatic splitting on", func() error {
		if b, err := banner(); err != nil || b != "true" {
			return fmt.Errorf("banner data-enabled %q (%v)", b, err)
		}
		return nil
	})
	if _, err := ctl("autosplit", "disable", "--reason", "page test"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the banner flipping to off", func() error {
		b, err := banner()
		if err != nil || b != "false" {
			return fmt.Errorf("banner data-enabled %q (%v)", b, err)
		}
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('banner').textContent`))
		if err != nil || !strings.Contains(text, "page test") {
			return fmt.Errorf("banner %q lacks the reason (%v)", text, err)
		}
		return nil
	})
}

// demoScreenshot saves the picture README shows (HOTSPLIT_DEMO_SCREENSHOT):
// the whole history once the demo has run past its hot-key phase into the
// shifting range, the pointer on the isolated key's band.
func demoScreenshot(t *testing.T, ctx context.Context, path, hotKey string) {
	testutil.Eventually(t, 3*time.Minute, "100 columns of the demo", func() error {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.hotsplitView ? window.hotsplitView.cells.reduce((n, c) => n + c.columns, 0) : 0`))
		if err != nil || n < 100 {
			return fmt.Errorf("%d columns drawn (%v)", n, err)
		}
		return nil
	})
	fromMs := func() (float64, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[float64](`window.hotsplitView.fromMs`))
	}
	hourAgo, err := fromMs()
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-range-ms="0"]').click()`)); err != nil {
		t.Fatal(err)
	}
	var p pagePoint
	testutil.Eventually(t, 30*time.Second, "the whole history painted", func() error {
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](fmt.Sprintf(hotPointJS, hotKey)))
		if err != nil {
			return err
		}
		p = pagePoint{}
		if err := json.Unmarshal(raw, &p); err != nil || p.Err != "" {
			return fmt.Errorf("%v %s", err, p.Err)
		}
		if from, err := fromMs(); err != nil || from <= hourAgo {
			return fmt.Errorf("painted from %v, not yet the oldest column (%v)", from, err)
		}
		return nil
	})
	if err := chromedp.Do(ctx, chromedp.MouseEvent(chromedp.MouseMoved, p.PageX, p.PageY)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil || os.WriteFile(path, png, 0o644) != nil {
		t.Fatalf("screenshot to %s: %v", path, err)
	}
}

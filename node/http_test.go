package node

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// The HTTP port's doors: probes open to anyone, /metrics to the reader role
// (or to anyone with MetricsInsecure), pprof only with EnablePprof and only
// to admins, the key visualizer (page, assets, API) to readers and browser
// sessions; a caller without credentials gets 401, one without the role
// 403, each counted. Under --insecure the page needs no login.
func TestIntegrationHTTPEndpointsByRole(t *testing.T) {
	skipShort(t)
	get := func(t *testing.T, addr, path string, cfg *tls.Config) (int, string) {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("https://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	anonymous := &tls.Config{RootCAs: testCA(t).Pool(), MinVersion: tls.VersionTLS13}
	reporter := clientTLS(t, "http-reporter", "reporter")
	reader := clientTLS(t, "http-reader", "reader")
	operator := clientTLS(t, "http-operator", "operator")
	admin := adminTLS(t)

	t.Run("secure", func(t *testing.T) {
		c := newTestCluster(t, 1, func(cfg *Config) { cfg.HTTPAddr, cfg.EnablePprof = "127.0.0.1:0", true })
		addr := c.node(c.waitLeaderReady(10 * time.Second)).HTTPAddr()
		for _, tc := range []struct {
			path   string
			cfg    *tls.Config
			who    string
			status int
			body   string
		}{
			{"/healthz", anonymous, "anonymous", http.StatusOK, "ok"},
			{"/readyz", anonymous, "anonymous", http.StatusOK, "ready"},
			{"/metrics", anonymous, "anonymous", http.StatusUnauthorized, ""},
			{"/metrics", reporter, "a reporter", http.StatusForbidden, `"http-reporter" may not read /metrics: it needs role reader`},
			{"/metrics", reader, "a reader", http.StatusOK, "hotsplit_build_info"},
			{"/debug/pprof/cmdline", anonymous, "anonymous", http.StatusUnauthorized, ""},
			{"/debug/pprof/cmdline", reader, "a reader", http.StatusForbidden, "needs role admin"},
			{"/debug/pprof/cmdline", operator, "an operator", http.StatusForbidden, "needs role admin"},
			{"/debug/pprof/cmdline", admin, "an admin", http.StatusOK, ""},
			// The key visualizer: page, assets and API to readers.
			{"/", anonymous, "anonymous", http.StatusUnauthorized, "hotsplitctl ui"},
			{"/", reporter, "a reporter", http.StatusForbidden, `"http-reporter" may not read /: it needs role reader`},
			{"/", reader, "a reader", http.StatusOK, "hotsplit key visualizer"},
			{"/", admin, "an admin", http.StatusOK, "hotsplit key visualizer"},
			{"/assets/app.js", anonymous, "anonymous", http.StatusUnauthorized, ""},
			{"/assets/app.js", reporter, "a reporter", http.StatusForbidden, "needs role reader"},
			{"/assets/app.js", reader, "a reader", http.StatusOK, "hotsplitView"},
			{"/assets/app.css", reader, "a reader", http.StatusOK, ""},
			{"/api/v1/heatmap", anonymous, "anonymous", http.StatusUnauthorized, ""},
			{"/api/v1/heatmap", reporter, "a reporter", http.StatusForbidden, "needs role reader"},
			{"/api/v1/heatmap", reader, "a reader", http.StatusOK, `"served_by":"n1"`},
			{"/api/v1/decisions", anonymous, "anonymous", http.StatusUnauthorized, ""},
			{"/api/v1/decisions", reporter, "a reporter", http.StatusForbidden, "needs role reader"},
			{"/api/v1/decisions", reader, "a reader", http.StatusOK, `"decisions":`},
			{"/api/v1/explain?route=1", anonymous, "anonymous", http.StatusUnauthorized, ""},
			{"/api/v1/explain?route=1", reporter, "a reporter", http.StatusForbidden, "needs role reader"},
			{"/api/v1/explain?route=1", reader, "a reader", http.StatusOK, `"route_id":1`},
			{"/login?code=nope", anonymous, "anonymous", http.StatusUnauthorized, "login query"},
		} {
			code, body := get(t, addr, tc.path, tc.cfg)
			if code != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("%s as %s: %d %q, want %d with %q", tc.path, tc.who, code, firstLine(body), tc.status, tc.body)
			}
		}
		n := c.node("n1")
		if got := metricSample2(t, n, "hotsplit_http_refused_total", "api", "403"); got != 3 {
			t.Errorf("refused API calls of the reporter counted %v, want 3", got)
		}
		if got := metricSample2(t, n, "hotsplit_http_refused_total", "page", "401"); got != 2 {
			t.Errorf("anonymous page and asset calls counted %v, want 2", got)
		}
		t.Run("session", func(t *testing.T) { checkBrowserSession(t, c, addr, anonymous) })
	})
	t.Run("defaults and metricsInsecure", func(t *testing.T) {
		c := newTestCluster(t, 1, func(cfg *Config) { cfg.HTTPAddr, cfg.MetricsInsecure = "127.0.0.1:0", true })
		addr := c.node(c.waitLeaderReady(10 * time.Second)).HTTPAddr()
		if code, body := get(t, addr, "/metrics", anonymous); code != http.StatusOK || !strings.Contains(body, "hotsplit_build_info") {
			t.Errorf("/metrics without credentials under MetricsInsecure: %d %q", code, firstLine(body))
		}
		if code, _ := get(t, addr, "/debug/pprof/cmdline", admin); code != http.StatusNotFound {
			t.Errorf("pprof without EnablePprof, as an admin: %d, want 404", code)
		}
		// MetricsInsecure opens /metrics only: the page still needs a reader.
		if code, _ := get(t, addr, "/api/v1/heatmap", anonymous); code != http.StatusUnauthorized {
			t.Errorf("the API without credentials under MetricsInsecure: %d, want 401", code)
		}
	})
	t.Run("insecure: no login", func(t *testing.T) {
		c := newTestCluster(t, 1, func(cfg *Config) { cfg.HTTPAddr, cfg.Insecure = "127.0.0.1:0", true })
		n := c.node(c.waitLeaderReady(10 * time.Second))
		minted, err := c.clusterClient("n1").MintUILogin(ctxT(t, 10*time.Second), &api.MintUILoginRequest{})
		if err != nil || minted.GetUrl() != "http://"+n.HTTPAddr()+"/" {
			t.Fatalf("MintUILogin on an insecure node: %v %v, want the page's plain URL", minted, err)
		}
		resp, err := http.Get(minted.GetUrl() + "api/v1/heatmap")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the API of an insecure node without credentials: %d", resp.StatusCode)
		}
	})
}

// checkBrowserSession logs in as a browser does — a reader mints a code
// over gRPC, the login URL sets the cookie — and checks what the session
// opens: the page, its assets and API; never /metrics, pprof, a method
// other than GET, or the gRPC port.
func checkBrowserSession(t *testing.T, c *testCluster, addr string, anonymous *tls.Config) {
	ctx := ctxT(t, 20*time.Second)
	readerConn, err := grpc.NewClient(c.cfgs["n1"].GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(t, "http-reader", "reader"))))
	if err != nil {
		t.Fatal(err)
	}
	defer readerConn.Close()
	minted, err := api.NewClusterClient(readerConn).MintUILogin(ctx, &api.MintUILoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://" + addr + "/login?code="; !strings.HasPrefix(minted.GetUrl(), want) || minted.GetNodeId() != "n1" {
		t.Fatalf("login URL %q of %q, want %s…", minted.GetUrl(), minted.GetNodeId(), want)
	}
	reporterConn, err := grpc.NewClient(c.cfgs["n1"].GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(t, "http-reporter", "reporter"))))
	if err != nil {
		t.Fatal(err)
	}
	defer reporterConn.Close()
	if _, err := api.NewClusterClient(reporterConn).MintUILogin(ctx, &api.MintUILoginRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a reporter minted a login: %v", err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: anonymous},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(minted.GetUrl())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "hotsplit_session_n1" {
			session = ck
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || session == nil || !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d to %q, cookie %+v", resp.StatusCode, resp.Header.Get("Location"), session)
	}
	do := func(method, path string) int {
		req, _ := http.NewRequest(method, "https://"+addr+path, nil)
		req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/", http.StatusOK},
		{"GET", "/assets/app.js", http.StatusOK},
		{"GET", "/api/v1/heatmap?metric=reads", http.StatusOK},
		{"GET", "/api/v1/decisions", http.StatusOK},
		{"GET", "/api/v1/explain?route=1", http.StatusOK},
		{"GET", "/metrics", http.StatusUnauthorized},
		{"GET", "/debug/pprof/cmdline", http.StatusUnauthorized},
		{"POST", "/api/v1/heatmap", http.StatusMethodNotAllowed},
		{"POST", "/", http.StatusMethodNotAllowed},
		{"GET", minted.GetUrl()[len("https://"+addr):], http.StatusUnauthorized}, // the code is spent
	} {
		if got := do(tc.method, tc.path); got != tc.status {
			t.Errorf("%s %s with a session: %d, want %d", tc.method, tc.path, got, tc.status)
		}
	}
	// The gRPC port knows no cookies: a mutation with one is unauthenticated.
	anonConn, err := grpc.NewClient(c.cfgs["n1"].GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(anonymous)))
	if err != nil {
		t.Fatal(err)
	}
	defer anonConn.Close()
	cctx := metadata.AppendToOutgoingContext(ctx, "cookie", session.Name+"="+session.Value)
	if _, err := api.NewAutoSplitClient(anonConn).SetEnabled(cctx, &api.SetEnabledRequest{Enabled: false, Actor: "browser"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a mutation with a session cookie on the gRPC port: %v, want Unauthenticated", err)
	}
	if got := metricSample(t, c.node("n1"), "hotsplit_ui_sessions", ""); got != 1 {
		t.Fatalf("hotsplit_ui_sessions %v, want 1", got)
	}
}

// metricSample2 reads the sample of a metric with two labels of the given
// values, in label-name order.
func metricSample2(t testing.TB, n *Node, name, v1, v2 string) float64 {
	t.Helper()
	mfs, err := n.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); mf.GetName() == name && len(l) == 2 && l[0].GetValue() == v1 && l[1].GetValue() == v2 {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no sample of %s{%s,%s}", name, v1, v2)
	return 0
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

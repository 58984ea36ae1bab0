package node

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The HTTP port's doors: probes open to anyone, /metrics to the reader role
// (or to anyone with MetricsInsecure), pprof only with EnablePprof and only
// to admins; a caller without credentials gets 401, one without the role 403.
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
		} {
			code, body := get(t, addr, tc.path, tc.cfg)
			if code != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("%s as %s: %d %q, want %d with %q", tc.path, tc.who, code, firstLine(body), tc.status, tc.body)
			}
		}
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
	})
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

package webauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotsplit/hotsplit/transport"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// tokens are bearer tokens of a reporter and a reader.
const (
	reporterToken = "reporter-token-0123456789"
	readerToken   = "reader-token-0123456789"
)

type fixture struct {
	s   *Store
	clk *clock
	reg *prometheus.Registry
	mux *http.ServeMux
}

func newFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	var lines []string
	for _, tk := range []struct{ name, role, tok string }{{"rep", "reporter", reporterToken}, {"rd", "reader", readerToken}} {
		sum := sha256.Sum256([]byte(tk.tok))
		lines = append(lines, tk.name+" "+tk.role+" "+hex.EncodeToString(sum[:]))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := transport.LoadTokenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{clk: &clock{now: time.Unix(1_700_000_000, 0)}, reg: prometheus.NewRegistry(), mux: http.NewServeMux()}
	cfg := Config{NodeID: "n1", BaseURL: func() string { return "https://127.0.0.1:7002" }, Auth: &transport.Authenticator{Tokens: tokens},
		Now: f.clk.Now, Registerer: f.reg, Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&cfg)
	}
	f.s = New(cfg)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "served") })
	f.mux.Handle("GET /{$}", f.s.Guard(EndpointPage, transport.RoleReader, true, ok))
	f.mux.Handle("GET /metrics", f.s.Guard(EndpointMetrics, transport.RoleReader, false, ok))
	f.mux.Handle("GET /login", f.s.Login())
	return f
}

// mint returns a fresh code's login URL.
func (f *fixture) mint(t *testing.T) *url.URL {
	t.Helper()
	resp, err := f.s.Mint(context.Background(), &transport.Principal{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(resp.GetUrl())
	if err != nil || u.Scheme != "https" || u.Host != "127.0.0.1:7002" || u.Path != "/login" || resp.GetNodeId() != "n1" {
		t.Fatalf("login URL %q (%v), node %q", resp.GetUrl(), err, resp.GetNodeId())
	}
	if want := uint64(f.clk.Now().Add(DefaultCodeTTL).UnixMilli()); resp.GetExpiresMs() != want {
		t.Fatalf("expires %d, want %d", resp.GetExpiresMs(), want)
	}
	return u
}

type answer struct {
	code   int
	body   string
	cookie *http.Cookie
	where  string
}

func (f *fixture) get(t *testing.T, target string, prep func(*http.Request)) answer {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if prep != nil {
		prep(r)
	}
	w := httptest.NewRecorder()
	f.mux.ServeHTTP(w, r)
	a := answer{code: w.Code, body: w.Body.String(), where: w.Header().Get("Location")}
	if cs := w.Result().Cookies(); len(cs) > 0 {
		a.cookie = cs[0]
	}
	return a
}

func (f *fixture) login(t *testing.T, u *url.URL) answer {
	t.Helper()
	return f.get(t, u.RequestURI(), nil)
}

func withCookie(c *http.Cookie) func(*http.Request) {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value}) }
}

func withToken(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func TestLoginOpensAReaderSession(t *testing.T) {
	f := newFixture(t, nil)
	a := f.login(t, f.mint(t))
	if a.code != http.StatusSeeOther || a.where != "/" || a.cookie == nil {
		t.Fatalf("login: %d to %q, cookie %v", a.code, a.where, a.cookie)
	}
	c := a.cookie
	if c.Name != "hotsplit_session_n1" || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" ||
		c.MaxAge != int(DefaultSessionTTL.Seconds()) || len(c.Value) != secretLen {
		t.Fatalf("session cookie %+v", c)
	}
	if a := f.get(t, "/", withCookie(c)); a.code != http.StatusOK || a.body != "served" {
		t.Fatalf("page with the session: %d %q", a.code, a.body)
	}
	// A session opens only what allows sessions: not /metrics.
	if a := f.get(t, "/metrics", withCookie(c)); a.code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a session: %d, want 401", a.code)
	}
	// Another node's cookie name, or a forged value, opens nothing.
	other := &http.Cookie{Name: "hotsplit_session_n2", Value: c.Value}
	forged := &http.Cookie{Name: c.Name, Value: strings.Repeat("A", secretLen)}
	for _, bad := range []*http.Cookie{other, forged} {
		if a := f.get(t, "/", withCookie(bad)); a.code != http.StatusUnauthorized || !strings.Contains(a.body, "hotsplitctl ui") {
			t.Fatalf("page with cookie %s: %d %q", bad.Name, a.code, a.body)
		}
	}
	// The session ends with its lifetime.
	f.clk.add(DefaultSessionTTL)
	if a := f.get(t, "/", withCookie(c)); a.code != http.StatusUnauthorized {
		t.Fatalf("page with an expired session: %d", a.code)
	}
	if got := testutil.ToFloat64(f.s.m.logins.WithLabelValues("opened")); got != 1 {
		t.Fatalf("sessions opened: %v", got)
	}
}

func TestLoginCodesAreOneUseAndExpire(t *testing.T) {
	f := newFixture(t, nil)
	u := f.mint(t)
	if a := f.login(t, u); a.code != http.StatusSeeOther {
		t.Fatalf("first use: %d", a.code)
	}
	if a := f.login(t, u); a.code != http.StatusUnauthorized || a.cookie != nil || !strings.Contains(a.body, "already used or expired") {
		t.Fatalf("second use: %d %q", a.code, a.body)
	}
	late := f.mint(t)
	f.clk.add(DefaultCodeTTL)
	if a := f.login(t, late); a.code != http.StatusUnauthorized || a.cookie != nil {
		t.Fatalf("expired code: %d", a.code)
	}
	unknown := *u
	unknown.RawQuery = "code=" + strings.Repeat("B", secretLen)
	if a := f.login(t, &unknown); a.code != http.StatusUnauthorized {
		t.Fatalf("unknown code: %d", a.code)
	}
	if got := testutil.ToFloat64(f.s.m.refused.WithLabelValues(EndpointLogin, "401")); got != 3 {
		t.Fatalf("refused logins counted %v, want 3", got)
	}
}

func TestLoginRefusesMalformedQueries(t *testing.T) {
	f := newFixture(t, nil)
	good := strings.Repeat("A", secretLen)
	for _, q := range []string{"", "code=", "code=" + good + "&code=" + good, "code=" + good + "&x=1", "code=" + good[1:],
		"code=" + good[1:] + "%2B", "code=%zz", "code=" + strings.Repeat("A", 300)} {
		a := f.get(t, "/login?"+q, nil)
		if a.code != http.StatusUnauthorized || !strings.HasPrefix(a.body, "login query: ") || a.cookie != nil {
			t.Errorf("query %q: %d %q", q, a.code, a.body)
		}
	}
}

// Tokens and certificates go through the authenticator: a reader is
// served, a reporter refused with 403, no credentials with 401; each
// refusal is counted by endpoint and status.
func TestGuardByRoleCounts(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		path string
		prep func(*http.Request)
		code int
	}{
		{"/", nil, http.StatusUnauthorized},
		{"/", withToken(reporterToken), http.StatusForbidden},
		{"/", withToken(readerToken), http.StatusOK},
		{"/metrics", withToken(reporterToken), http.StatusForbidden},
		{"/metrics", withToken(readerToken), http.StatusOK},
		{"/metrics", nil, http.StatusUnauthorized},
		{"/metrics", withToken("bogus"), http.StatusUnauthorized},
	} {
		if a := f.get(t, tc.path, tc.prep); a.code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.path, a.code, a.body, tc.code)
		}
	}
	for _, c := range []struct {
		endpoint, status string
		want             float64
	}{{EndpointPage, "401", 1}, {EndpointPage, "403", 1}, {EndpointMetrics, "401", 2}, {EndpointMetrics, "403", 1}, {EndpointAPI, "401", 0}} {
		if got := testutil.ToFloat64(f.s.m.refused.WithLabelValues(c.endpoint, c.status)); got != c.want {
			t.Errorf("hotsplit_http_refused_total{endpoint=%q,status=%q} = %v, want %v", c.endpoint, c.status, got, c.want)
		}
	}
}

func TestBoundsEvictTheOldest(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxCodes, c.MaxSessions = 3, 2 })
	var codes []*url.URL
	for range 4 {
		codes = append(codes, f.mint(t))
	}
	if a := f.login(t, codes[0]); a.code != http.StatusUnauthorized {
		t.Fatalf("the code evicted by the fourth: %d", a.code)
	}
	var cookies []*http.Cookie
	for _, u := range codes[1:] {
		f.clk.add(time.Second)
		a := f.login(t, u)
		if a.cookie == nil {
			t.Fatalf("login: %d %q", a.code, a.body)
		}
		cookies = append(cookies, a.cookie)
	}
	want := []int{http.StatusUnauthorized, http.StatusOK, http.StatusOK}
	for i, c := range cookies {
		if a := f.get(t, "/", withCookie(c)); a.code != want[i] {
			t.Fatalf("session %d of 3 with room for 2: %d, want %d", i, a.code, want[i])
		}
	}
	if n := f.s.sessionCount(); n != 2 {
		t.Fatalf("%v sessions kept", n)
	}
}

func TestInsecureNeedsNoLogin(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Auth = &transport.Authenticator{Insecure: true}
		c.BaseURL = func() string { return "http://127.0.0.1:7002" }
	})
	resp, err := f.s.Mint(context.Background(), nil)
	if err != nil || resp.GetUrl() != "http://127.0.0.1:7002/" {
		t.Fatalf("mint on an insecure node: %v %v", resp, err)
	}
	if a := f.get(t, "/", nil); a.code != http.StatusOK {
		t.Fatalf("page without credentials on an insecure node: %d", a.code)
	}
	if a := f.get(t, "/login?code=x", nil); a.code != http.StatusSeeOther || a.cookie != nil {
		t.Fatalf("login on an insecure node: %d %v", a.code, a.cookie)
	}
}

func TestGuardRefusesSessionsBeyondReader(t *testing.T) {
	f := newFixture(t, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("sessions on an operator endpoint were accepted")
		}
	}()
	f.s.Guard(EndpointAPI, transport.RoleOperator, true, http.NotFoundHandler())
}

// FuzzParseLoginQuery: any query either parses to a code of 43 base64url
// characters that round-trips, or is refused with an error that does not
// echo the input. Never panics.
func FuzzParseLoginQuery(f *testing.F) {
	f.Add("code=" + strings.Repeat("A", secretLen))
	f.Add("code=abc&code=def")
	f.Add("x=1")
	f.Add("%zz")
	f.Fuzz(func(t *testing.T, raw string) {
		code, err := ParseLoginQuery(raw)
		if err != nil {
			if len(raw) > 8 && strings.Contains(err.Error(), raw) {
				t.Fatalf("error echoes the input: %v", err)
			}
			return
		}
		if len(code) != secretLen || strings.Trim(code, base64URL) != "" {
			t.Fatalf("accepted code %q", code)
		}
		again, err := ParseLoginQuery("code=" + code)
		if err != nil || again != code {
			t.Fatalf("round trip: %q %v", again, err)
		}
	})
}

func TestMintForBoundsItsLifetime(t *testing.T) {
	f := newFixture(t, nil)
	resp, err := f.s.MintFor(context.Background(), nil, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.GetUrl())
	f.clk.add(14 * time.Minute)
	if a := f.login(t, u); a.code != http.StatusSeeOther {
		t.Fatalf("a 15-minute code after 14 minutes: %d", a.code)
	}
	for _, ttl := range []time.Duration{0, -time.Second, MaxCodeTTL + time.Second} {
		if _, err := f.s.MintFor(context.Background(), nil, ttl); err == nil {
			t.Errorf("MintFor(%v) accepted", ttl)
		}
	}
}

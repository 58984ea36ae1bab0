package webauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/transport"
)

// Defaults of the bounds (docs/security.md, "Browser sessions").
const (
	DefaultCodeTTL     = 60 * time.Second
	DefaultSessionTTL  = 8 * time.Hour
	DefaultMaxCodes    = 64
	DefaultMaxSessions = 256
)

// secretBytes is the entropy of a code and of a session id; secretLen is
// its base64url length.
const (
	secretBytes = 32
	secretLen   = 43
)

// Config configures a Store.
type Config struct {
	// NodeID names the session cookie (CookiePrefix + NodeID).
	NodeID string
	// BaseURL returns this node's page, scheme and advertised HTTP
	// address (https://host:port), for the login URLs Mint returns.
	BaseURL func() string
	// Auth authenticates callers by certificate or token; Insecure means
	// no login at all (every caller may read the page).
	Auth *transport.Authenticator
	// Bounds (0: the defaults).
	CodeTTL, SessionTTL   time.Duration
	MaxCodes, MaxSessions int
	// Now is the clock of expiries (nil: time.Now).
	Now        func() time.Time
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Store holds the login codes and sessions of one node. It is safe for
// concurrent use.
type Store struct {
	cfg Config
	m   *metrics

	mu       sync.Mutex
	codes    []pending                  // oldest first
	sessions map[[sha256.Size]byte]live // by digest of the cookie value
}

type pending struct {
	digest  [sha256.Size]byte
	expires time.Time
	by      string
}

type live struct {
	created, expires time.Time
	by               string // who minted the code, for the log
}

// CookiePrefix starts every session cookie's name.
const CookiePrefix = "hotsplit_session_"

// New returns an empty store.
func New(cfg Config) *Store {
	if cfg.CodeTTL <= 0 {
		cfg.CodeTTL = DefaultCodeTTL
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.MaxCodes <= 0 {
		cfg.MaxCodes = DefaultMaxCodes
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Auth == nil {
		cfg.Auth = &transport.Authenticator{Insecure: true}
	}
	s := &Store{cfg: cfg, sessions: make(map[[sha256.Size]byte]live)}
	s.m = newMetrics(cfg.Registerer, s.sessionCount)
	return s
}

// CookieName is this node's session cookie.
func (s *Store) CookieName() string { return CookiePrefix + s.cfg.NodeID }

var _ transport.UILogin = (*Store)(nil)

// Mint makes a one-time code valid for the configured CodeTTL and returns
// the URL that redeems it. On an insecure node there is nothing to
// redeem: the URL is the page itself.
func (s *Store) Mint(ctx context.Context, by *transport.Principal) (*api.MintUILoginResponse, error) {
	return s.MintFor(ctx, by, s.cfg.CodeTTL)
}

// MaxCodeTTL bounds the life of a code MintFor makes.
const MaxCodeTTL = time.Hour

// MintFor is Mint with a code valid for ttl (at most MaxCodeTTL): the
// --dev demo prints its URL at start, long before anyone clicks it.
func (s *Store) MintFor(_ context.Context, by *transport.Principal, ttl time.Duration) (*api.MintUILoginResponse, error) {
	if ttl <= 0 || ttl > MaxCodeTTL {
		return nil, fmt.Errorf("ui login: code lifetime %v not in (0, %v]", ttl, MaxCodeTTL)
	}
	base := s.cfg.BaseURL()
	if s.cfg.Auth.Insecure {
		return &api.MintUILoginResponse{Url: base + "/", NodeId: s.cfg.NodeID}, nil
	}
	code, digest, err := newSecret()
	if err != nil {
		return nil, fmt.Errorf("ui login: %w", err)
	}
	name := ""
	if by != nil {
		name = by.Name
	}
	now := s.cfg.Now()
	p := pending{digest: digest, expires: now.Add(ttl), by: name}
	s.mu.Lock()
	s.codes = slices.DeleteFunc(s.codes, func(c pending) bool { return !now.Before(c.expires) })
	if len(s.codes) >= s.cfg.MaxCodes {
		s.codes = slices.Delete(s.codes, 0, len(s.codes)-s.cfg.MaxCodes+1)
	}
	s.codes = append(s.codes, p)
	s.mu.Unlock()
	s.m.logins.WithLabelValues("minted").Inc()
	s.cfg.Logger.Info("ui login code minted", "by", name, "expires_in", ttl.String())
	return &api.MintUILoginResponse{Url: base + "/login?code=" + code, ExpiresMs: uint64(p.expires.UnixMilli()), NodeId: s.cfg.NodeID}, nil
}

// redeem spends a code: it opens a session and returns its cookie value,
// or false for a code unknown, used or expired. Every pending code is
// compared, in constant time.
func (s *Store) redeem(code string) (string, live, bool) {
	d := sha256.Sum256([]byte(code))
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	found := -1
	for i := range s.codes {
		if subtle.ConstantTimeCompare(s.codes[i].digest[:], d[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", live{}, false
	}
	p := s.codes[found]
	s.codes = slices.Delete(s.codes, found, found+1) // one use, expired or not
	if !now.Before(p.expires) {
		return "", live{}, false
	}
	value, digest, err := newSecret()
	if err != nil {
		return "", live{}, false
	}
	s.evictSessions(now)
	l := live{created: now, expires: now.Add(s.cfg.SessionTTL), by: p.by}
	s.sessions[digest] = l
	return value, l, true
}

// evictSessions drops expired sessions and, at the bound, the oldest.
// s.mu is held.
func (s *Store) evictSessions(now time.Time) {
	for d, l := range s.sessions {
		if !now.Before(l.expires) {
			delete(s.sessions, d)
		}
	}
	for len(s.sessions) >= s.cfg.MaxSessions {
		var oldest [sha256.Size]byte
		first := true
		for d, l := range s.sessions {
			if first || l.created.Before(s.sessions[oldest].created) {
				oldest, first = d, false
			}
		}
		delete(s.sessions, oldest)
	}
}

// valid reports whether value is a live session's cookie.
func (s *Store) valid(value string) bool {
	if len(value) != secretLen {
		return false
	}
	d := sha256.Sum256([]byte(value))
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.sessions[d]
	if ok && !now.Before(l.expires) {
		delete(s.sessions, d)
		return false
	}
	return ok
}

func (s *Store) sessionCount() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(len(s.sessions))
}

// newSecret returns 32 random bytes in base64url and the digest kept of
// them.
func newSecret() (string, [sha256.Size]byte, error) {
	var b [secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [sha256.Size]byte{}, err
	}
	v := base64.RawURLEncoding.EncodeToString(b[:])
	return v, sha256.Sum256([]byte(v)), nil
}

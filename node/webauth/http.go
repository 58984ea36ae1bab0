package webauth

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/hotsplit/hotsplit/transport"
)

// Guard serves h to callers of role (client certificate or bearer token)
// and, when sessions is set, to holders of a live session of this node —
// which stands for the reader role, so only endpoints that need no more
// may set it. Anyone else gets 401 (no credentials) or 403 (not the
// role), counted under endpoint.
func (s *Store) Guard(endpoint string, role transport.Role, sessions bool, h http.Handler) http.Handler {
	if sessions && role != transport.RoleReader {
		panic(fmt.Sprintf("webauth: sessions allowed on %s, which needs role %s: a session is a reader", endpoint, role))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sessions && s.hasSession(r) {
			h.ServeHTTP(w, r)
			return
		}
		p, err := s.cfg.Auth.FromHTTP(r)
		if err != nil {
			msg := status.Convert(err).Message()
			if sessions {
				msg += "; in a browser, open the login URL `hotsplitctl ui` prints"
			}
			s.refuse(w, endpoint, http.StatusUnauthorized, msg)
			return
		}
		if !p.Has(role) {
			s.refuse(w, endpoint, http.StatusForbidden, fmt.Sprintf("identity %q may not read %s: it needs role %s", p.Name, r.URL.Path, role))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Store) hasSession(r *http.Request) bool {
	c, err := r.Cookie(s.CookieName())
	return err == nil && s.valid(c.Value)
}

func (s *Store) refuse(w http.ResponseWriter, endpoint string, code int, msg string) {
	s.m.refused.WithLabelValues(endpoint, fmt.Sprint(code)).Inc()
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, code)
}

// Login serves GET /login?code=…: a valid code becomes a session cookie
// (HttpOnly, Secure, SameSite=Strict, named after this node) and a
// redirect to the page; anything else is 401. On an insecure node it only
// redirects: the page is open.
func (s *Store) Login() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		if s.cfg.Auth.Insecure {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		code, err := ParseLoginQuery(r.URL.RawQuery)
		if err != nil {
			s.m.logins.WithLabelValues("refused").Inc()
			s.refuse(w, EndpointLogin, http.StatusUnauthorized, err.Error())
			return
		}
		value, l, ok := s.redeem(code)
		if !ok {
			s.m.logins.WithLabelValues("refused").Inc()
			s.refuse(w, EndpointLogin, http.StatusUnauthorized, "login code unknown, already used or expired: run `hotsplitctl ui` for a new one")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: s.CookieName(), Value: value, Path: "/", Expires: l.expires,
			MaxAge: int(s.cfg.SessionTTL.Seconds()), HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		s.m.logins.WithLabelValues("opened").Inc()
		s.cfg.Logger.Info("ui session opened", "minted_by", l.by, "remote", r.RemoteAddr, "expires_in", s.cfg.SessionTTL.String())
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
}

// ParseLoginQuery reads the query of GET /login: exactly one parameter,
// code, once, 43 characters of base64url. Errors name what is wrong and
// never echo the input.
func ParseLoginQuery(raw string) (string, error) {
	if len(raw) > 256 {
		return "", fmt.Errorf("login query: %d bytes, want code=<43 characters>", len(raw))
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "", fmt.Errorf("login query: not a query string")
	}
	for k := range q {
		if k != "code" {
			return "", fmt.Errorf("login query: unknown parameter (only code is)")
		}
	}
	vs := q["code"]
	switch {
	case len(vs) == 0:
		return "", fmt.Errorf("login query: code missing")
	case len(vs) > 1:
		return "", fmt.Errorf("login query: code given %d times", len(vs))
	case len(vs[0]) != secretLen || strings.Trim(vs[0], base64URL) != "":
		return "", fmt.Errorf("login query: code is not %d characters of base64url", secretLen)
	}
	return vs[0], nil
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

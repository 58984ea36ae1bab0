package webui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/hotsplit/hotsplit/heatmap"
)

// Handler serves the page, its assets and the JSON API.
type Handler struct {
	src Source
}

// New returns the handlers of the page and the API over src.
func New(src Source) *Handler { return &Handler{src: src} }

// Endpoint is one pattern the UI serves (Go 1.22 ServeMux syntax).
type Endpoint struct {
	Pattern string
	Handler http.Handler
}

// Endpoints lists everything the UI serves, so the node can wrap each
// (authentication, roles) before registering it on its own mux. The page
// is GET /{$} only: other paths are not the UI's.
func (h *Handler) Endpoints() []Endpoint {
	return []Endpoint{
		{"GET /{$}", http.HandlerFunc(servePage)},
		{"GET /assets/{name}", http.HandlerFunc(serveAsset)},
		{"GET /api/v1/heatmap", http.HandlerFunc(h.heatmap)},
		{"GET /api/v1/decisions", http.HandlerFunc(h.decisions)},
		{"GET /api/v1/explain", http.HandlerFunc(h.explain)},
	}
}

// Register registers every endpoint on mux, each wrapped by wrap (nil:
// as is).
func (h *Handler) Register(mux *http.ServeMux, wrap func(http.Handler) http.Handler) {
	for _, r := range h.Endpoints() {
		hh := r.Handler
		if wrap != nil {
			hh = wrap(hh)
		}
		mux.Handle(r.Pattern, hh)
	}
}

// answerTimeout bounds one API answer: the Source reads local state, so
// only an overloaded node comes near it.
const answerTimeout = 10 * time.Second

// contentSecurityPolicy lets the page load only its own embedded assets:
// no inline script or style, no other origin, no network beyond its API.
const contentSecurityPolicy = "default-src 'self'"

// secureHeaders are set on every answer of the UI.
func secureHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
}

func (h *Handler) heatmap(w http.ResponseWriter, r *http.Request) {
	p, err := ParseHeatmapParams(r.URL.RawQuery)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), answerTimeout)
	defer cancel()
	s, err := h.src.Snapshot(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	a, err := buildHeatmap(s, p)
	if err != nil {
		fail(w, err)
		return
	}
	secureHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// Written in chunks as it is encoded (an hour at a 1 s step is ~5 MB).
	// A write error is the client gone: nothing to answer it.
	var werr error
	flush := func(b []byte) []byte {
		if werr == nil {
			_, werr = w.Write(b)
		}
		return b[:0]
	}
	b := appendHeatmapAnswer(make([]byte, 0, flushAt+32<<10), a, flush)
	flush(append(b, '\n'))
}

func (h *Handler) decisions(w http.ResponseWriter, r *http.Request) {
	p, err := ParseDecisionsParams(r.URL.RawQuery)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), answerTimeout)
	defer cancel()
	s, err := h.src.Snapshot(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, buildDecisions(s, p))
}

func (h *Handler) explain(w http.ResponseWriter, r *http.Request) {
	id, err := ParseExplainParams(r.URL.RawQuery)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), answerTimeout)
	defer cancel()
	resp, err := h.src.Explain(ctx, id)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, buildExplain(id, resp))
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v) // escapes <, > and & too
	if err != nil {
		fail(w, err)
		return
	}
	secureHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// fail answers an error as text: 400 for a refused parameter, 404 for an
// unknown route, 503 when the node cannot answer now, 500 otherwise.
func fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var pe *ParamError
	switch {
	case errors.As(err, &pe), errors.Is(err, heatmap.ErrInvalidInput):
		code = http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusServiceUnavailable
	}
	secureHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, err.Error(), code) // text/plain and nosniff
}

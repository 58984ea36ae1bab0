package webui

import (
	"embed"
	"net/http"
	"path"
)

// The page and its assets, embedded: the node serves them with no file
// system and the browser fetches nothing from elsewhere.
//
//go:embed assets/index.html assets/app.js assets/app.css
var assets embed.FS

// assetTypes are the assets served under /assets/ and their content
// types; nothing else is (no directory listing, no index.html twice).
var assetTypes = map[string]string{
	"app.js":  "text/javascript; charset=utf-8",
	"app.css": "text/css; charset=utf-8",
}

func servePage(w http.ResponseWriter, _ *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		fail(w, err)
		return
	}
	secureHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	typ, ok := assetTypes[name]
	if !ok {
		secureHeaders(w)
		http.NotFound(w, r)
		return
	}
	b, err := assets.ReadFile(path.Join("assets", name))
	if err != nil {
		fail(w, err)
		return
	}
	secureHeaders(w)
	w.Header().Set("Content-Type", typ)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

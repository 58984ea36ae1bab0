// Package webui is the key visualizer's web page and its JSON API: a
// hand-written canvas page (embedded, no network fetch, no inline script)
// drawing load over key space × time with every split and merge, and the
// handlers of GET /api/v1/heatmap, /api/v1/decisions and /api/v1/explain
// it polls (docs/design.md#the-key-visualizer; docs/operations.md documents the API).
//
// It reads a node's replicated state through Source, a small interface the
// node implements over its state machine; it never reaches raft, the
// network or the clock itself, and imports only heatmap, api/hotsplitv1
// and catalog of ours. It does no authentication or authorization: the
// node wraps every route Routes returns (sessions, roles) before serving
// it. Key bytes come from reporters, the least-trusted role, so they leave
// here only in the escaped key format (catalog.EscapeKey) inside JSON, and
// the page puts them on screen through textContent and canvas text only.
package webui

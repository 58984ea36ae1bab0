// Package webauth is the HTTP port's door for browsers: one-time login
// codes minted over gRPC (Cluster/MintUILogin, `hotsplitctl ui`), the
// session cookies they turn into at GET /login, and the check every
// endpoint of the key visualizer passes — a caller of the reader role
// (client certificate or bearer token) or a session — with every 401 and
// 403 of the port counted.
//
// A session grants the reader role and nothing else, whoever minted its
// code; it opens only the endpoints wrapped with sessions allowed (the
// page, its assets, /api/v1/*), never /metrics, pprof or anything that
// changes state. Codes and sessions live in this process's memory only:
// node-local (the cookie is named after the node, since the demo's nodes
// share 127.0.0.1 and cookies ignore ports), bounded in number and
// lifetime, lost on restart. Codes are compared in constant time.
//
// It must not reach raft, the state machine or the disk, and holds no
// secret but the digests of live codes and sessions.
package webauth

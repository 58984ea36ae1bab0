// Package client is the thin gRPC client of hotsplit's four services
// (Catalog, Load, AutoSplit, Cluster), used by hotsplitctl, keyviz reporters,
// the simulator and the jepsen tests.
//
// It knows the endpoint list, follows leader hints, puts a request id on every
// mutation and retries only where that is safe: reads, and mutations that
// definitely were not applied (the error contract of docs/design.md: status
// Unavailable with ErrorOutcome{OUTCOME_NOT_APPLIED}, Aborted, or a
// connection that never became ready, so nothing was sent). A mutation whose
// outcome is unknown is never retried automatically; its error wraps
// ErrUnknownOutcome and carries the request id, so the caller can resolve it
// by re-sending the same request with the same id.
//
// A connection failure that retrying cannot fix is a *PermanentError
// (errors.Is ErrPermanent), classified from typed errors: the client
// certificate expired or not yet valid (checked before dialing), refused by
// the server, the server's certificate not signed by the CA, a plaintext
// client at a TLS server or the reverse, a port that is no gRPC port. It is
// never retried: a problem of the client's own settings ends the call at
// once, one of a single endpoint drops that endpoint for the call
// (Problem.EveryEndpoint). Its message names the Config setting to fix.
//
// It holds no business rules and imports nothing of hotsplit's but the
// generated API and the backup file format (backupfile, which SaveBackup
// writes): it never interprets routes, configs or reasons, and it never
// decides on its own that a write "probably" failed.
//
// Transport security: TLS 1.3 with the cluster's CA (Config.TLS or
// Config.CACertFile), and an identity the cluster authenticates: a client
// certificate (CN = name, O = roles) or a bearer token (Config.Token, sent
// as "authorization: Bearer <token>"). Plaintext only when asked for with
// Config.Insecure, for a cluster started with --insecure; New refuses a
// Config that names neither (ErrNoTransportSecurity).
package client

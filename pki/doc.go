// Package pki makes and reads the certificates and keys of a hotsplit
// cluster, and keeps a node's TLS material current while it runs.
//
// One CA per cluster: a certificate is bound to its cluster by the CA that
// signed it, and nothing else (docs/security.md, "Cluster binding"). A node
// certificate has CN = node id, O = node, the serverAuth and clientAuth key
// usages and the node's IP/DNS subject alternative names; a client
// certificate has CN = the client's name and one O per role (the Kubernetes
// convention), never O = node. Keys are ECDSA P-256 in PKCS#8; files made by
// plain openssl (RSA or ECDSA, PKCS#1, SEC 1 or PKCS#8) are read as well.
//
// A Reloader serves a node's certificate, key and CA bundle to TLS
// handshakes and re-reads the files when they change (polled) or when asked
// (SIGHUP): connections keep the session they have, new handshakes get the
// new material, and files that do not make a valid set (a new certificate
// beside the old key, say) leave the previous set in place with one WARN
// line.
//
// It uses the standard library only, imports nothing of hotsplit's, and
// decides no authorization: it says who a certificate names, not what that
// identity may do.
package pki

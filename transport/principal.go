package transport

import (
	"context"
	"crypto/x509"
	"slices"
	"strings"
)

// Role is what an identity may do (docs/design.md#trust-and-integrity). reporter < reader < operator
// < admin: each includes the ones before it. node is apart: peer traffic
// between members.
type Role uint8

// Roles, in order of what they include.
const (
	RoleNone Role = iota
	RoleReporter
	RoleReader
	RoleOperator
	RoleAdmin
	// RoleNode is a member's own certificate (O=node, CN = node id).
	RoleNode
)

// roleNobody marks a method no client role may call (peer traffic only).
const roleNobody Role = 255

var roleNames = [...]string{"none", "reporter", "reader", "operator", "admin", "node"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "unknown"
}

// ParseRole maps a role name (a certificate O, a token file column) to a
// Role; ok is false for names that are not roles.
func ParseRole(name string) (Role, bool) {
	for i, n := range roleNames {
		if i > 0 && n == name {
			return Role(i), true
		}
	}
	return RoleNone, false
}

// Principal is an authenticated caller.
type Principal struct {
	// Name is the certificate CN or the token's name; a node's id for node
	// certificates. Empty only for the anonymous principal of an insecure
	// node.
	Name string
	// Roles held, sorted, no duplicates.
	Roles []Role
	// Via says how the identity was established: "certificate", "token",
	// "insecure", or "forwarded by <node id>".
	Via string
}

// Has reports whether p may act with role r: it holds r or a role of the
// reporter…admin order above it.
func (p *Principal) Has(r Role) bool {
	for _, h := range p.Roles {
		if h == r || r < RoleNode && h < RoleNode && h > r {
			return true
		}
	}
	return false
}

// IsNode reports whether p is a member's node certificate.
func (p *Principal) IsNode() bool { return slices.Contains(p.Roles, RoleNode) }

func (p *Principal) rolesString() string {
	if len(p.Roles) == 0 {
		return "none"
	}
	names := make([]string, len(p.Roles))
	for i, r := range p.Roles {
		names[i] = r.String()
	}
	return strings.Join(names, ",")
}

// insecurePrincipal is every caller of a node started with --insecure: no
// identity can be proven, so nothing is refused (the node says so at start).
var insecurePrincipal = &Principal{Via: "insecure", Roles: []Role{RoleAdmin, RoleNode}}

// principalFromCert reads the identity of a verified client certificate:
// CN = name, each O that names a role = a role (the Kubernetes convention);
// other O values are ignored.
func principalFromCert(c *x509.Certificate) *Principal {
	p := &Principal{Name: c.Subject.CommonName, Via: "certificate"}
	for _, o := range c.Subject.Organization {
		if r, ok := ParseRole(o); ok {
			p.Roles = append(p.Roles, r)
		}
	}
	slices.Sort(p.Roles)
	p.Roles = slices.Compact(p.Roles)
	return p
}

type principalKey struct{}

// withPrincipal returns ctx carrying p.
func withPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller authenticated by the interceptors.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok
}

// actor returns the actor and note to put on a mutation: the note as the
// replicated state would keep it (fsm.State.KeptNote: older replicas would
// refuse the field).
func (s *Server) actor(ctx context.Context, declared string) (actor, note string) {
	actor, note = actorOf(ctx, declared)
	return actor, s.cfg.FSM.State().KeptNote(note)
}

// actorOf returns the actor to record for a mutation: the authenticated
// identity, with the caller's self-declared text kept as a note beside it.
// An insecure node can prove no identity: the declared text stays the actor.
func actorOf(ctx context.Context, declared string) (actor, note string) {
	p, ok := PrincipalFrom(ctx)
	if !ok || p.Name == "" {
		return declared, ""
	}
	if declared == p.Name {
		declared = ""
	}
	return p.Name, declared
}

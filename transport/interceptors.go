package transport

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// principalHeader carries, on a forwarded call, the identity the entry node
// authenticated: "roles\nname" with roles comma-separated. The leader
// honours it only from a current member presenting its node certificate
// and checks authorization again; from anyone else it is ignored.
const principalHeader = "hotsplit-principal-bin"

func encodePrincipal(p *Principal) string {
	roles := make([]string, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = r.String()
	}
	return strings.Join(roles, ",") + "\n" + p.Name
}

func decodePrincipal(v, via string) (*Principal, bool) {
	roles, name, ok := strings.Cut(v, "\n")
	if !ok || name == "" {
		return nil, false
	}
	p := &Principal{Name: name, Via: "forwarded by " + via}
	for _, r := range strings.Split(roles, ",") {
		if role, ok := ParseRole(r); ok {
			p.Roles = append(p.Roles, role)
		}
	}
	return p, true
}

// caller authenticates a call and resolves a forwarded identity; forwarded
// reports whether the identity came from a member that forwarded the call.
func (s *Server) caller(ctx context.Context) (p *Principal, forwarded bool, err error) {
	p, err = s.auth.FromGRPC(ctx)
	if err != nil {
		return nil, false, err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(principalHeader)
	if len(v) == 0 || p == insecurePrincipal || !p.IsNode() || !s.isMember(p.Name) {
		return p, false, nil
	}
	fp, ok := decodePrincipal(v[0], p.Name)
	if !ok {
		return nil, false, status.Errorf(codes.InvalidArgument, "%s: malformed forwarded identity from %s", principalHeader, p.Name)
	}
	return fp, true, nil
}

func (s *Server) isMember(id string) bool {
	if s.cfg.IsMember != nil {
		return s.cfg.IsMember(id)
	}
	_, ok := s.cfg.FSM.State().Member(id)
	return ok
}

// admit runs every check a call passes before its handler: the request
// decoded, the caller is authenticated and authorized, and (on the node the
// call entered) within its rate limit. req is nil for streams.
func (s *Server) admit(ctx context.Context, method string, req any) (context.Context, error) {
	var wire *reportWire
	if r, ok := req.(*api.ReportRequest); ok {
		wire = s.codec.reportWire(r) // taken first: every path forgets it
	}
	ctx, err := s.admitCall(ctx, method, req, wire)
	if err != nil {
		wire.free()
	}
	return ctx, err
}

// admitCall is admit with the report's bytes, if the call is a report that
// came through the codec's report path.
func (s *Server) admitCall(ctx context.Context, method string, req any, wire *reportWire) (context.Context, error) {
	if req != nil {
		if why := s.codec.decodeFailure(req); why != "" {
			s.cfg.Metrics.refuse(refusedBadRequest)
			return ctx, status.Error(codes.InvalidArgument, why)
		}
	}
	p, forwarded, err := s.caller(ctx)
	if err != nil {
		s.cfg.Metrics.refuse(refusedUnauthenticated)
		return ctx, err
	}
	if err := authorize(p, method, req); err != nil {
		s.cfg.Metrics.refuse(refusedPermission)
		s.log.Warn("call refused", "identity", p.Name, "via", p.Via, "method", method, "reason", status.Convert(err).Message())
		return ctx, err
	}
	if wire != nil {
		if err := checkReportSize(ctx, wire.len()); err != nil {
			s.cfg.Metrics.refuse(refusedBadRequest)
			return ctx, err
		}
		ctx = context.WithValue(ctx, reportWireKey{}, wire)
	}
	if !forwarded && p != insecurePrincipal && !s.limits.allow(p.Name, authzTable[method].limit) {
		s.cfg.Metrics.refuse(refusedRateLimited)
		return ctx, status.Errorf(codes.ResourceExhausted, "identity %q is over its %s rate limit on this node; back off and retry", p.Name, authzTable[method].limit)
	}
	return withPrincipal(ctx, p), nil
}

// UnaryInterceptor admits (see admit) and records every unary call.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		start := time.Now()
		defer func() { s.cfg.Metrics.observe(info.FullMethod, start, err) }()
		if ctx, err = s.admit(ctx, info.FullMethod, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor admits and records every stream. The request of a
// server stream is checked for authorization rules that need it when the
// handler receives it.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		start := time.Now()
		defer func() { s.cfg.Metrics.observe(info.FullMethod, start, err) }()
		ctx, err := s.admit(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return err
		}
		return handler(srv, &admittedStream{ServerStream: ss, ctx: ctx, s: s, method: info.FullMethod})
	}
}

// admittedStream carries the principal and refuses a request message that
// did not decode or that the caller may not send.
type admittedStream struct {
	grpc.ServerStream
	ctx    context.Context
	s      *Server
	method string
}

func (a *admittedStream) Context() context.Context { return a.ctx }

func (a *admittedStream) RecvMsg(m any) error {
	if err := a.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if why := a.s.codec.decodeFailure(m); why != "" {
		a.s.cfg.Metrics.refuse(refusedBadRequest)
		return status.Error(codes.InvalidArgument, why)
	}
	p, _ := PrincipalFrom(a.ctx)
	if err := authorize(p, a.method, m); err != nil {
		a.s.cfg.Metrics.refuse(refusedPermission)
		return err
	}
	return nil
}

package client

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// RequestIDHeader is the gRPC metadata key that carries a mutation's request
// id on every mutation, including those whose request message has no
// request_id field (Join, Remove, TransferLeadership, Report), so servers can
// log it.
const RequestIDHeader = "hotsplit-request-id"

// NewRequestID returns a fresh request id: 16 random bytes, hex-encoded.
func NewRequestID() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// call describes one RPC for the retry loop.
type call struct {
	name      string
	mutation  bool
	requestID string // mutations only
	// long calls wait on raft by design (a leadership transfer, a
	// membership change, a snapshot stream): one attempt may take the whole
	// request timeout.
	long bool
}

// invoke runs fn against the cluster with the retry policy of the package
// doc: leader first, then the endpoint list; each attempt bounded by
// AttemptTimeout; retries, until RequestTimeout (or MaxRetries when set),
// only reads and definite failures; a fresh leader hint is followed at once,
// other retries wait a capped, jittered backoff; the request id rides along
// unchanged on every attempt. A permanent failure (PermanentError) is never
// retried: one of the client's own settings ends the call at once, one of
// an endpoint's drops that endpoint for the rest of the call (see
// Problem.EveryEndpoint).
func invoke[T any](ctx context.Context, c *Client, r call, fn func(context.Context, grpc.ClientConnInterface) (T, error)) (T, error) {
	var zero T
	outcome := outcomeRead
	if r.mutation {
		outcome = outcomeNotApplied
	}
	if pe := c.sec.checkOwnCert(time.Now()); pe != nil {
		return zero, &Error{RPC: r.name, RequestID: r.requestID, Err: pe, outcome: outcome}
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if r.requestID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, RequestIDHeader, r.requestID)
	}
	addr := c.firstAddr()
	tried := map[string]bool{}
	var broken []*PermanentError // endpoints dropped for this call
	for attempt := 1; ; attempt++ {
		tried[addr] = true
		believed := c.LeaderAddr()
		actx, acancel := ctx, context.CancelFunc(func() {})
		if !r.long {
			actx, acancel = context.WithTimeout(ctx, c.attemptTimeout)
		}
		resp, sent, err := tryOnce(actx, c, addr, fn)
		silent := !sent || (attemptTimedOut(actx, err) && ctx.Err() == nil)
		acancel()
		c.markAnswered(addr, !silent)
		if err == nil {
			return resp, nil
		}
		if errors.Is(err, ErrClosed) {
			return zero, fmt.Errorf("%s: %w", r.name, err)
		}
		if pe, ok := errors.AsType[*PermanentError](err); ok {
			// Nothing reached a hotsplit server: even a mutation was not
			// applied.
			c.forgetLeader(addr)
			fail := &Error{RPC: r.name, Endpoint: addr, RequestID: r.requestID, Attempts: attempt, Err: pe, outcome: outcome, Skipped: broken}
			if pe.Problem.EveryEndpoint() || c.maxRetries < 0 || (c.maxRetries > 0 && attempt > c.maxRetries) {
				return zero, fail
			}
			broken = append(broken, pe)
			next := c.nextUnbroken(addr, broken)
			if next == "" || !hasBudget(ctx) {
				return zero, fail
			}
			addr = next // at once: no pause helps another endpoint
			continue
		}
		v := classify(ctx, err, r.mutation, sent)
		hint := LeaderHint(err)
		follow := ""
		if hint != nil {
			follow = c.learnLeader(hint, addr)
		}
		if follow == "" && (!sent || status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded) {
			c.forgetLeader(addr) // it did not answer, or answered that it does not lead
		}
		fail := &Error{RPC: r.name, Endpoint: addr, RequestID: r.requestID, Attempts: attempt, Hint: hint, Err: err, outcome: v.outcome, Skipped: broken}
		if !v.retry || c.maxRetries < 0 || (c.maxRetries > 0 && attempt > c.maxRetries) || ctx.Err() != nil {
			return zero, fail
		}
		c.log.Debug("retrying", "rpc", r.name, "endpoint", addr, "attempt", attempt,
			"request_id", r.requestID, "code", status.Code(err).String(), "leader_hint", follow, "err", err)
		if isBroken(follow, broken) {
			follow = ""
		}
		if follow != "" && (!tried[follow] || follow != believed) {
			if !hasBudget(ctx) {
				return zero, fail
			}
			addr = follow // a fresh hint, or a newer leader than we believed: at once
			continue
		}
		if follow != "" {
			addr = follow // back to a tried node, e.g. a busy leader: after a pause
		} else if addr = c.nextUnbroken(addr, broken); addr == "" {
			return zero, fail
		}
		if err := c.sleep(ctx, attempt, v.overload); err != nil || !hasBudget(ctx) {
			return zero, fail
		}
	}
}

// deadlineSlack: a DeadlineExceeded this close to the attempt's deadline is
// the attempt timing out, whoever reported it.
const deadlineSlack = 20 * time.Millisecond

// attemptTimedOut reports whether err is the attempt running out of time
// without an answer. gRPC servers enforce the caller's deadline too, and a
// server's DeadlineExceeded can arrive a moment before the caller's own
// timer fires (actx.Err() still nil): that is a node that did not answer in
// time, not an answer.
func attemptTimedOut(actx context.Context, err error) bool {
	if status.Code(err) != codes.DeadlineExceeded {
		return false
	}
	if actx.Err() != nil {
		return true
	}
	dl, ok := actx.Deadline()
	return ok && time.Until(dl) < deadlineSlack
}

// minAttempt is the least time left for a call to start another attempt:
// one cut short by the call's deadline would only replace the last answer
// (and a mutation's definite "not applied") with a bare deadline error.
const minAttempt = 100 * time.Millisecond

func hasBudget(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return !ok || time.Until(d) >= minAttempt
}

// tryOnce makes one attempt at addr. sent is false when the connection never
// became ready, so nothing left this process.
func tryOnce[T any](ctx context.Context, c *Client, addr string, fn func(context.Context, grpc.ClientConnInterface) (T, error)) (resp T, sent bool, err error) {
	ec, err := c.conn(addr)
	if err != nil {
		return resp, false, err
	}
	if err := c.ready(ctx, ec); err != nil {
		if errors.Is(err, ErrClosed) {
			return resp, false, err
		}
		return resp, false, unreachable(addr, err)
	}
	octx, obs := observe(ctx)
	resp, err = fn(octx, ec.cc)
	if pe := obs.notGRPC(addr, err); pe != nil {
		return resp, true, pe
	}
	return resp, true, err
}

// nextUnbroken is nextAddr among the endpoints not dropped for this call;
// "" when every endpoint has been.
func (c *Client) nextUnbroken(addr string, broken []*PermanentError) string {
	for range c.endpoints {
		if addr = c.nextAddr(addr); !isBroken(addr, broken) {
			return addr
		}
	}
	return ""
}

func isBroken(addr string, broken []*PermanentError) bool {
	for _, pe := range broken {
		if pe.Endpoint == addr {
			return true
		}
	}
	return false
}

// ready waits, at most DialTimeout, until ec's connection is READY. A
// connection in TRANSIENT_FAILURE fails at once with the last dial error, and
// is told to reconnect now rather than after gRPC's own backoff, so that the
// next attempt (after ours) sees a fresh result.
func (c *Client) ready(parent context.Context, ec *endpointConn) error {
	ctx, cancel := context.WithTimeout(parent, c.dialTimeout)
	defer cancel()
	for {
		s := ec.cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			ec.cc.Connect()
		case connectivity.TransientFailure:
			// The cause first: the reconnect asked for next may record
			// its own.
			err := ec.lastDialErr()
			if err == nil {
				ec.cc.ResetConnectBackoff()
				return errors.New("connection failed")
			}
			err = c.explain(parent, ec, err) // its own DialTimeout, not what is left of this wait
			if !errors.Is(err, ErrPermanent) {
				ec.cc.ResetConnectBackoff()
			}
			return err
		case connectivity.Shutdown:
			return ErrClosed
		}
		if !ec.cc.WaitForStateChange(ctx, s) {
			// The connection attempt under way has not failed: a recorded
			// error is an earlier attempt's, context only (never
			// permanent: this attempt may succeed).
			before := ""
			if err := ec.lastDialErr(); err != nil {
				before = "; the attempt before: " + err.Error()
			}
			if parent.Err() != nil {
				return fmt.Errorf("no connection before the call's deadline (state %s%s)", s, before)
			}
			return fmt.Errorf("no connection within %v (state %s%s)", c.dialTimeout, s, before)
		}
	}
}

// sleep waits the backoff before retry number retry (1-based), or until ctx
// ends. Overload (ResourceExhausted) backs off up to MaxBackoff; anything
// else (no leader yet) up to MaxElectionBackoff, so a new leader is found
// soon after its election.
func (c *Client) sleep(ctx context.Context, retry int, overload bool) error {
	d := c.backoffDelay(retry)
	if !overload {
		d = min(d, MaxElectionBackoff)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoffDelay doubles from Backoff per retry, caps at MaxBackoff, and
// picks uniformly from the upper half so that clients retrying together
// spread out.
func (c *Client) backoffDelay(retry int) time.Duration {
	d := MaxBackoff
	if shift := retry - 1; shift < 16 {
		d = min(c.backoff<<shift, MaxBackoff)
	}
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

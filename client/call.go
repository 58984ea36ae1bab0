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
}

// invoke runs fn against the cluster with the retry policy of the package
// doc: leader first, then the endpoint list; retries (bounded by MaxRetries
// and RequestTimeout, with capped jittered backoff) only reads and definite
// failures; the request id rides along unchanged on every attempt.
func invoke[T any](ctx context.Context, c *Client, r call, fn func(context.Context, grpc.ClientConnInterface) (T, error)) (T, error) {
	var zero T
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if r.requestID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, RequestIDHeader, r.requestID)
	}
	addr := c.firstAddr()
	tried := map[string]bool{}
	for attempt := 1; ; attempt++ {
		tried[addr] = true
		resp, sent, err := tryOnce(ctx, c, addr, fn)
		if err == nil {
			return resp, nil
		}
		if errors.Is(err, ErrClosed) {
			return zero, fmt.Errorf("%s: %w", r.name, err)
		}
		v := classify(ctx, err, r.mutation, sent)
		hint := LeaderHint(err)
		follow := ""
		if hint != nil {
			follow = c.learnLeader(hint, addr)
		}
		if follow == "" && (!sent || status.Code(err) == codes.Unavailable) {
			c.forgetLeader(addr)
		}
		fail := &Error{RPC: r.name, Endpoint: addr, RequestID: r.requestID, Attempts: attempt, Hint: hint, Err: err, outcome: v.outcome}
		if !v.retry || attempt > c.maxRetries || ctx.Err() != nil {
			return zero, fail
		}
		c.log.Debug("retrying", "rpc", r.name, "endpoint", addr, "attempt", attempt,
			"request_id", r.requestID, "code", status.Code(err).String(), "leader_hint", follow, "err", err)
		if follow != "" && !tried[follow] {
			addr = follow // a fresh hint is worth trying at once
			continue
		}
		if follow != "" {
			addr = follow // back to a tried node, e.g. a busy leader: after a pause
		} else {
			addr = c.nextAddr(addr)
		}
		if err := c.sleep(ctx, attempt); err != nil {
			return zero, fail
		}
	}
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
	resp, err = fn(ctx, ec.cc)
	return resp, true, err
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
			ec.cc.ResetConnectBackoff()
			if err := ec.lastDialErr(); err != nil {
				return err
			}
			return errors.New("connection failed")
		case connectivity.Shutdown:
			return ErrClosed
		}
		if !ec.cc.WaitForStateChange(ctx, s) {
			if err := ec.lastDialErr(); err != nil {
				return err
			}
			if parent.Err() != nil {
				return fmt.Errorf("no connection before the call's deadline (state %s)", s)
			}
			return fmt.Errorf("no connection within %v (state %s)", c.dialTimeout, s)
		}
	}
}

// sleep waits the backoff before retry number retry (1-based), or until ctx
// ends.
func (c *Client) sleep(ctx context.Context, retry int) error {
	t := time.NewTimer(c.backoffDelay(retry))
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

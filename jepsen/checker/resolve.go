package checker

import (
	"fmt"

	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/model"
)

// Codes a client can see for a request the FSM itself refused (the entry is
// in the log, with a failure): version mismatch and other preconditions,
// an unknown route, and a fence refusal.
var fsmRefusalCodes = map[string]bool{"FailedPrecondition": true, "NotFound": true, "Aborted": true}

// Codes that promise the request never reached the log.
var neverLoggedCodes = map[string]bool{"Unavailable": true, "ResourceExhausted": true}

// resolve checks every client result against the model's replay of the
// log and returns the history with unknown outcomes resolved: an unknown
// mutation whose request id is in the log takes the log's outcome
// (Resolution "applied at index N" or "refused at index N: code"), one
// that is not was never applied ("not in the log").
func resolve(ops []history.Op, replay *model.Replay) ([]history.Op, []error) {
	var errs []error
	out := make([]history.Op, len(ops))
	switchByRID := map[string]model.SwitchEvent{}
	for _, s := range replay.Switches {
		if s.RequestID != "" {
			if _, dup := switchByRID[s.RequestID]; !dup {
				switchByRID[s.RequestID] = s
			}
		}
	}
	for i, op := range ops {
		switch op.Kind {
		case history.Split:
			errs = append(errs, resolveSplit(&op, replay)...)
		case history.Merge:
			errs = append(errs, resolveMerge(&op, replay)...)
		case history.SetEnabled:
			errs = append(errs, resolveSwitch(&op, switchByRID)...)
		case history.ListRoutes:
			errs = append(errs, checkRead(op, replay)...)
		case history.GetRoute:
			errs = append(errs, checkGetRoute(op, replay)...)
		}
		out[i] = op
	}
	return out, errs
}

func resolveSplit(op *history.Op, replay *model.Replay) []error {
	res, logged := replay.Requests[op.RequestID]
	bad := func(format string, args ...any) []error {
		return []error{fmt.Errorf("op %d (client %d, split r%d at %q, request %s): %s", op.ID, op.Client, op.RouteID, op.SplitKey, op.RequestID, fmt.Sprintf(format, args...))}
	}
	switch op.Status {
	case history.OK:
		switch {
		case !logged:
			return bad("the client saw it applied at version %d, but its request id is not in the committed log", op.Version)
		case res.Code != model.OK:
			return bad("the client saw it applied at version %d, but the log's rules refuse it at index %d: %s", op.Version, res.Index, res.Code)
		case res.Version != op.Version || res.Children[0].ID != op.LeftID || res.Children[1].ID != op.RightID || res.HLC != op.CommitHLC:
			return bad("the client saw version %d children r%d,r%d at HLC %d; the log made version %d children r%d,r%d at HLC %d (index %d)",
				op.Version, op.LeftID, op.RightID, op.CommitHLC, res.Version, res.Children[0].ID, res.Children[1].ID, res.HLC, res.Index)
		}
	case history.Fail:
		if errs := resolveFailed(op, res, logged, bad); errs != nil {
			return errs
		}
	case history.Unknown:
		switch {
		case !logged:
			op.Resolution = "not in the log"
		case res.Code == model.OK:
			op.Resolution = fmt.Sprintf("applied at index %d", res.Index)
			op.Version, op.LeftID, op.RightID, op.CommitHLC = res.Version, res.Children[0].ID, res.Children[1].ID, res.HLC
		default:
			op.Resolution = fmt.Sprintf("refused at index %d: %s", res.Index, res.Code)
		}
	}
	return nil
}

// resolveFailed checks a split's or merge's definite failure against the
// log, the same for both: a never-applied code for a logged request, an
// FSM refusal absent from the log, or a refusal the log applies are
// violations; otherwise it records whether the FSM gave the refusal.
func resolveFailed(op *history.Op, res model.Outcome, logged bool, bad func(string, ...any) []error) []error {
	switch {
	case neverLoggedCodes[op.Code] && logged:
		return bad("the client was told %s (never applied), but the request is in the log at index %d (%s)", op.Code, res.Index, res.Code)
	case fsmRefusalCodes[op.Code] && !logged:
		return bad("the client was told %s by the FSM, but the request is not in the committed log", op.Code)
	case logged && res.Code == model.OK:
		return bad("the client was told %s, but the log applies it at index %d (version %d)", op.Code, res.Index, res.Version)
	}
	op.FromFSM = logged
	return nil
}

func resolveMerge(op *history.Op, replay *model.Replay) []error {
	res, logged := replay.Requests[op.RequestID]
	bad := func(format string, args ...any) []error {
		return []error{fmt.Errorf("op %d (client %d, merge r%d and r%d, request %s): %s", op.ID, op.Client, op.RouteID, op.RightRouteID, op.RequestID, fmt.Sprintf(format, args...))}
	}
	switch op.Status {
	case history.OK:
		switch {
		case !logged:
			return bad("the client saw it applied at version %d, but its request id is not in the committed log", op.Version)
		case res.Code != model.OK:
			return bad("the client saw it applied at version %d (r%d), but the log's rules refuse it at index %d: %s", op.Version, op.MergedID, res.Index, res.Code)
		case res.Version != op.Version || res.Merged.ID != op.MergedID || res.HLC != op.CommitHLC:
			return bad("the client saw version %d merged route r%d at HLC %d; the log made version %d route r%d at HLC %d (index %d)",
				op.Version, op.MergedID, op.CommitHLC, res.Version, res.Merged.ID, res.HLC, res.Index)
		}
	case history.Fail:
		if errs := resolveFailed(op, res, logged, bad); errs != nil {
			return errs
		}
	case history.Unknown:
		switch {
		case !logged:
			op.Resolution = "not in the log"
		case res.Code == model.OK:
			op.Resolution = fmt.Sprintf("applied at index %d", res.Index)
			op.Version, op.MergedID, op.CommitHLC = res.Version, res.Merged.ID, res.HLC
		default:
			op.Resolution = fmt.Sprintf("refused at index %d: %s", res.Index, res.Code)
		}
	}
	return nil
}

func resolveSwitch(op *history.Op, byRID map[string]model.SwitchEvent) []error {
	ev, logged := byRID[op.RequestID]
	bad := func(format string, args ...any) []error {
		return []error{fmt.Errorf("op %d (client %d, set_enabled %v %q, request %s): %s", op.ID, op.Client, op.Enabled, op.Reason, op.RequestID, fmt.Sprintf(format, args...))}
	}
	switch op.Status {
	case history.OK:
		switch {
		case !logged:
			return bad("the client saw it applied, but its request id is not in the committed log")
		case !ev.Applied || ev.Enabled != op.Enabled || ev.Reason != op.Reason:
			return bad("the log's entry at index %d (enabled %v, reason %q, applied %v) is not what the client sent", ev.Index, ev.Enabled, ev.Reason, ev.Applied)
		case op.SwitchEnabled != op.Enabled || op.SwitchReason != op.Reason:
			return bad("the answer showed the switch as enabled %v reason %q", op.SwitchEnabled, op.SwitchReason)
		}
	case history.Fail:
		if neverLoggedCodes[op.Code] && logged {
			return bad("the client was told %s (never applied), but the request is in the log at index %d", op.Code, ev.Index)
		}
		op.FromFSM = logged
	case history.Unknown:
		switch {
		case !logged:
			op.Resolution = "not in the log"
		case ev.Applied:
			op.Resolution = fmt.Sprintf("applied at index %d", ev.Index)
		default:
			op.Resolution = fmt.Sprintf("refused at index %d", ev.Index)
		}
	}
	return nil
}

// checkRead: a read at version v returned catalog(v).
func checkRead(op history.Op, replay *model.Replay) []error {
	if op.Status != history.OK {
		return nil
	}
	c, ok := replay.CatalogAt(op.Version)
	switch {
	case !ok:
		return []error{fmt.Errorf("op %d (client %d, read served by %s): version %d is not a version of the committed log (last %d)",
			op.ID, op.Client, op.ServedBy, op.Version, replay.Final().Version)}
	case c.Hash().Hex() != op.RoutesHash || len(c.Routes) != op.RouteCount:
		return []error{fmt.Errorf("op %d (client %d, read served by %s): version %d returned %d routes with hash %s; the log's catalog at version %d has %d routes, hash %s",
			op.ID, op.Client, op.ServedBy, op.Version, op.RouteCount, op.RoutesHash, op.Version, len(c.Routes), c.Hash())}
	}
	return nil
}

// checkGetRoute: a GetRoute at version v returned a route of catalog(v),
// as it is there, holding the key it was looked up by. (A lookup by id
// answered NotFound names no version: porcupine judges it.)
func checkGetRoute(op history.Op, replay *model.Replay) []error {
	if op.Status != history.OK || op.Gone {
		return nil
	}
	bad := func(format string, args ...any) []error {
		return []error{fmt.Errorf("op %d (client %d, get_route served by %s): %s", op.ID, op.Client, op.ServedBy, fmt.Sprintf(format, args...))}
	}
	c, ok := replay.CatalogAt(op.Version)
	if !ok {
		return bad("version %d is not a version of the committed log (last %d)", op.Version, replay.Final().Version)
	}
	r, live := c.Route(op.RouteID)
	switch {
	case !live:
		return bad("returned r%d at version %d, where the log's catalog has no such route", op.RouteID, op.Version)
	case model.HashRoutes([]model.Route{r}).Hex() != op.RoutesHash:
		return bad("returned r%d at version %d (hash %s), not as the log's catalog has it: %s", op.RouteID, op.Version, op.RoutesHash, r)
	case op.ByKey && !r.Contains(op.Key):
		return bad("looked up %q and returned %s, which does not hold it", op.Key, r)
	}
	return nil
}

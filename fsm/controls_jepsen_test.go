//go:build jepsen

package fsm

import (
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// The merge-CAS negative control does what the jepsen suite relies on: on,
// a merge with a stale expected_version applies; off again, it is refused.
// (A control that did nothing would make its jepsen scenario pass vacuously.)
func TestSkipMergeCASControl(t *testing.T) {
	h := mergeState(t) // catalog version 1: r1..r4
	wantCode(t, h.run(split(1, "c")), api.ResultCode_RESULT_CODE_OK)
	// The catalog is at version 2; version 1 is stale.
	wantCode(t, h.run(mergeCAS(2, 3, 1)), api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
	SetSkipMergeCAS(true)
	t.Cleanup(func() { SetSkipMergeCAS(false) })
	r := h.run(mergeCAS(2, 3, 1))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	if r.CatalogVersion != 3 {
		t.Fatalf("stale merge made version %d", r.CatalogVersion)
	}
	// The control leaves the split's CAS alone.
	wantCode(t, h.run(splitCAS(4, "w", 1)), api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
	SetSkipMergeCAS(false)
	wantCode(t, h.run(mergeCAS(7, 4, 1)), api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
}

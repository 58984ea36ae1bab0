package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/hotsplit/hotsplit/fsm"
)

// stateBusinessHash hashes the replicated state minus what moves on its own or
// records a request without applying it: the fence (ceiling, last HLC) and
// the request-id table. "A rejected request changed nothing" compares it,
// in tests and over the jepsen build's /jepsen/state.
func stateBusinessHash(st *fsm.State) (string, error) {
	p := st.Proto()
	p.CeilingMs, p.LastHlc, p.Requests, p.NextRequestSeq = 0, 0, nil, 0
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("business hash: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

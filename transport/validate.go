package transport

import (
	"unicode/utf8"

	"github.com/hotsplit/hotsplit/catalog"
)

// Request-shape limits checked before anything reaches the log
// (docs/design.md#limits-and-bad-input).
const (
	maxRequestIDLen = 128
	maxActorLen     = 256
	maxReasonLen    = 1024
	maxPageSize     = 10000
	defaultPageSize = 1000
	maxTimestamps   = 10000
	maxReporterLen  = 128
	maxAddrLen      = 256
)

func checkText(field, v string, limit int) error {
	if len(v) > limit {
		return invalid("%s: %d bytes exceeds the limit of %d", field, len(v), limit)
	}
	if !utf8.ValidString(v) {
		return invalid("%s: not valid UTF-8", field)
	}
	return nil
}

func checkMutationMeta(requestID, actor string) error {
	if err := checkText("request_id", requestID, maxRequestIDLen); err != nil {
		return err
	}
	return checkText("actor", actor, maxActorLen)
}

// checkSplitKey admits boundaries up to MaxKeyLen bytes, and one byte more
// only as H·0x00 (the upper edge of an isolated key H): a longer boundary
// could never be a route's start used by a data key.
func checkSplitKey(field string, k []byte) error {
	switch {
	case len(k) == 0:
		return invalid("%s: must not be empty", field)
	case len(k) > catalog.MaxBoundaryLen:
		return invalid("%s: %d bytes exceeds the limit of %d", field, len(k), catalog.MaxBoundaryLen)
	case len(k) == catalog.MaxBoundaryLen && k[len(k)-1] != 0:
		return invalid("%s: a %d-byte boundary must end in 0x00 (the upper edge of a %d-byte key)", field, len(k), catalog.MaxKeyLen)
	}
	return nil
}

func checkDataKey(field string, k []byte) error {
	if len(k) > catalog.MaxKeyLen {
		return invalid("%s: %d bytes exceeds the limit of %d", field, len(k), catalog.MaxKeyLen)
	}
	return nil
}

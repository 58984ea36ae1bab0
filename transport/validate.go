package transport

import (
	"unicode/utf8"

	"github.com/hotsplit/hotsplit/catalog"
)

// Request-shape limits checked before anything reaches the log (SPEC §12).
const (
	maxRequestIDLen = 128
	maxActorLen     = 256
	maxReasonLen    = 1024
	maxPageSize     = 10000
	defaultPageSize = 1000
	maxTimestamps   = 10000
	maxNodeIDLen    = 128
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

func checkSplitKey(field string, k []byte) error {
	switch {
	case len(k) == 0:
		return invalid("%s: must not be empty", field)
	case len(k) > catalog.MaxBoundaryLen:
		return invalid("%s: %d bytes exceeds the limit of %d", field, len(k), catalog.MaxBoundaryLen)
	}
	return nil
}

func checkDataKey(field string, k []byte) error {
	if len(k) > catalog.MaxKeyLen {
		return invalid("%s: %d bytes exceeds the limit of %d", field, len(k), catalog.MaxKeyLen)
	}
	return nil
}

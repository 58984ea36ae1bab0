package fsm

import (
	"errors"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"google.golang.org/protobuf/proto"
)

// EncodeCommand marshals c deterministically: the same command always gives
// the same log entry bytes.
func EncodeCommand(c *api.Command) ([]byte, error) {
	if c == nil {
		return nil, errors.New("encode command: nil")
	}
	if c.GetBody() == nil {
		return nil, fmt.Errorf("encode command: %w: no body", ErrUnknownCommand)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	return b, nil
}

// DecodeCommand parses a log entry strictly: a field this build does not
// know, at any depth, is ErrDecode; an entry without a command this build
// knows is ErrUnknownCommand. Apply halts on either (docs/design.md#the-state-machine).
func DecodeCommand(b []byte) (*api.Command, error) {
	c := &api.Command{}
	if err := api.UnmarshalStrict(b, c); err != nil {
		return nil, fmt.Errorf("%w: command: %w", ErrDecode, err)
	}
	if c.GetBody() == nil {
		return nil, fmt.Errorf("%w: entry of %d bytes has no command body", ErrUnknownCommand, len(b))
	}
	return c, nil
}

// Command kinds, used as the metrics label and in logs (a fixed set).
const (
	kindBootstrap      = "bootstrap"
	kindAdvanceCeiling = "advance_ceiling"
	kindSetMember      = "set_member"
	kindRemoveMember   = "remove_member"
	kindSplitRange     = "split_range"
	kindObserveColumn  = "observe_column"
	kindSetAutoSplit   = "set_auto_split"
	kindSetConfig      = "set_config"
	kindAbortOp        = "abort_op"
	kindAdmitMember    = "admit_member"
	kindCheckState     = "check_state"
	kindMergeRange     = "merge_range"
	kindAddGroup       = "add_group"
	kindSetGroup       = "set_group"
	kindRemoveGroup    = "remove_group"
	kindMoveRange      = "move_range"
	kindAckMove        = "ack_move"
	kindInvalid        = "invalid"
)

var commandKinds = []string{kindBootstrap, kindAdvanceCeiling, kindSetMember, kindRemoveMember,
	kindSplitRange, kindObserveColumn, kindSetAutoSplit, kindSetConfig, kindAbortOp, kindAdmitMember, kindCheckState,
	kindMergeRange, kindAddGroup, kindSetGroup, kindRemoveGroup, kindMoveRange, kindAckMove, kindInvalid}

func commandKind(c *api.Command) string {
	switch c.GetBody().(type) {
	case *api.Command_Bootstrap:
		return kindBootstrap
	case *api.Command_AdvanceCeiling:
		return kindAdvanceCeiling
	case *api.Command_SetMember:
		return kindSetMember
	case *api.Command_RemoveMember:
		return kindRemoveMember
	case *api.Command_SplitRange:
		return kindSplitRange
	case *api.Command_ObserveColumn:
		return kindObserveColumn
	case *api.Command_SetAutoSplit:
		return kindSetAutoSplit
	case *api.Command_SetConfig:
		return kindSetConfig
	case *api.Command_AbortOp:
		return kindAbortOp
	case *api.Command_AdmitMember:
		return kindAdmitMember
	case *api.Command_CheckState:
		return kindCheckState
	case *api.Command_MergeRange:
		return kindMergeRange
	case *api.Command_AddGroup:
		return kindAddGroup
	case *api.Command_SetGroup:
		return kindSetGroup
	case *api.Command_RemoveGroup:
		return kindRemoveGroup
	case *api.Command_MoveRange:
		return kindMoveRange
	case *api.Command_AckMove:
		return kindAckMove
	}
	return kindInvalid
}

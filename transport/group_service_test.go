package transport

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
)

// Oversized group requests are refused before they could become an entry,
// naming the field; so are bad request ids and actors.
func TestGroupRequestValidation(t *testing.T) {
	c := &catalogServer{s: &Server{}}
	many := make([]string, fsm.MaxGroupIdentities+1)
	long := strings.Repeat("x", fsm.MaxIdentityLen+1)
	for _, tc := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"add: name too long", func() error {
			_, err := c.AddGroup(context.Background(), &api.AddGroupRequest{Name: strings.Repeat("a", fsm.MaxGroupNameLen+1)})
			return err
		}, "name: 65 bytes exceeds the limit of 64"},
		{"add: too many identities", func() error {
			_, err := c.AddGroup(context.Background(), &api.AddGroupRequest{Name: "east", Identities: many})
			return err
		}, "identities: 33 exceeds the limit of 32"},
		{"set: identity too long", func() error {
			_, err := c.SetGroup(context.Background(), &api.SetGroupRequest{GroupId: 1, AddIdentities: []string{"a", long}})
			return err
		}, "identities[1]: 65 bytes"},
		{"set: too many to remove", func() error {
			_, err := c.SetGroup(context.Background(), &api.SetGroupRequest{GroupId: 1, RemoveIdentities: many})
			return err
		}, "remove_identities: 33 exceeds"},
		{"remove: request id too long", func() error {
			_, err := c.RemoveGroup(context.Background(), &api.RemoveGroupRequest{GroupId: 1, RequestId: strings.Repeat("r", maxRequestIDLen+1)})
			return err
		}, "request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			code, outcome, _ := outcomeOf(t, err)
			if code != codes.InvalidArgument || outcome != api.Outcome_OUTCOME_NOT_APPLIED || !strings.Contains(status.Convert(err).Message(), tc.field) {
				t.Fatalf("%v, want InvalidArgument NOT_APPLIED naming %q", err, tc.field)
			}
		})
	}
}

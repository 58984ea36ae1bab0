package fsm

import (
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func TestEnumName(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{EnumName(api.SplitOrigin_SPLIT_ORIGIN_SUB_BUCKET_MEDIAN), "sub_bucket_median"},
		{EnumName(api.ResultCode_RESULT_CODE_OP_PAUSED), "op_paused"},
		{EnumName(api.SwitchSource_SWITCH_SOURCE_OPERATOR), "operator"},
		{EnumName(api.HealthStatus_HEALTH_STATUS_NO_QUORUM), "no_quorum"},
		{EnumName(api.Reason(999)), "reason(999)"},
		{EnumName(api.AutoSplitFlag(-3)), "autosplitflag(-3)"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

package fsm

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// EnumName is how logs, metric labels and hotsplitctl show an API enum
// value: its name without the type's prefix, in lower case
// (SPLIT_ORIGIN_SUB_BUCKET_MEDIAN -> sub_bucket_median). A value this build
// does not know shows as its number.
func EnumName(e protoreflect.Enum) string {
	d := e.Descriptor()
	v := d.Values().ByNumber(e.Number())
	if v == nil {
		return strings.ToLower(string(d.Name())) + "(" + strconv.Itoa(int(e.Number())) + ")"
	}
	var prefix strings.Builder
	for i, r := range string(d.Name()) {
		if 'A' <= r && r <= 'Z' && i > 0 {
			prefix.WriteByte('_')
		}
		prefix.WriteRune(r)
	}
	return enumLabel(string(v.Name()), strings.ToUpper(prefix.String())+"_")
}

package hotsplitv1

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// UnmarshalStrict decodes b into m and fails if b holds a field this build
// does not know, at any depth. Replicated data (log entries, snapshots) must
// be decoded with it: a replica that silently dropped a field written by a
// newer version would diverge from the others. Protobuf has no end marker, so
// trailing garbage surfaces either as a parse error or as unknown fields and
// is rejected either way. API requests use plain proto.Unmarshal instead:
// they ignore unknown fields (docs/design.md#limits-and-bad-input).
func UnmarshalStrict(b []byte, m proto.Message) error {
	if err := proto.Unmarshal(b, m); err != nil {
		return err
	}
	return CheckKnownFields(m)
}

// CheckKnownFields reports the first unknown field found in m or in any
// message reachable from it, naming its path.
func CheckKnownFields(m proto.Message) error {
	return checkKnown(m.ProtoReflect(), string(m.ProtoReflect().Descriptor().Name()))
}

func checkKnown(m protoreflect.Message, path string) error {
	if u := m.GetUnknown(); len(u) > 0 {
		return fmt.Errorf("%s: %d bytes of unknown fields", path, len(u))
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = checkKnown(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Message() != nil {
					err = checkKnown(mv.Message(), fmt.Sprintf("%s[%v]", p, k.Interface()))
				}
				return err == nil
			})
		default:
			err = checkKnown(v.Message(), p)
		}
		return err == nil
	})
	return err
}

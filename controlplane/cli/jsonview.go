package cli

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// jsonView is a record as the CLI's --json prints it: snake_case field names
// (the proto names), enum values as the API's filters spell them
// ("outcome_unknown", not "STATE_OUTCOME_UNKNOWN"), timestamps in RFC 3339,
// and bytes that hold JSON (arguments, canonical_intent, result bodies) as
// JSON values rather than base64. Other bytes stay base64; zero values are
// left out, as protojson does. It walks the message by reflection, so
// fields added to the protos appear without a change here.
func jsonView(m proto.Message) map[string]any {
	if m == nil {
		return nil
	}
	r := m.ProtoReflect()
	if !r.IsValid() {
		return nil
	}
	out := make(map[string]any)
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out[string(fd.Name())] = fieldValue(fd, v)
		return true
	})
	if x, ok := m.(*recordv1.Execution); ok {
		// The delivery fact is told whole: "not_recorded" too, which as
		// the zero value would be left out, and "delivered" for records
		// from before the field (lifecycle.DeliveryOf).
		out["delivery"] = lifecycle.DeliveryName(lifecycle.DeliveryOf(x))
	}
	return out
}

func fieldValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case fd.IsList():
		l := v.List()
		items := make([]any, l.Len())
		for i := range items {
			items[i] = scalarValue(fd, l.Get(i))
		}
		return items
	case fd.IsMap():
		m := make(map[string]any)
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			m[k.String()] = scalarValue(fd.MapValue(), mv)
			return true
		})
		return m
	}
	return scalarValue(fd, v)
}

func scalarValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		return enumName(fd.Enum(), v.Enum())
	case protoreflect.BytesKind:
		b := v.Bytes()
		if json.Valid(b) {
			return json.RawMessage(b)
		}
		return base64.StdEncoding.EncodeToString(b)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		msg := v.Message().Interface()
		if ts, ok := msg.(*timestamppb.Timestamp); ok {
			return ts.AsTime().UTC().Format(time.RFC3339Nano)
		}
		return jsonView(msg)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return v.Uint()
	}
	return v.Interface()
}

// enumName is an enum value's name without its type prefix, lowercase:
// STATE_OUTCOME_UNKNOWN -> outcome_unknown, SESSION_STATE_PENDING -> pending.
// The prefix is the zero value's name less "UNSPECIFIED".
func enumName(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) string {
	vd := ed.Values().ByNumber(n)
	if vd == nil {
		return ""
	}
	name := string(vd.Name())
	if zero := ed.Values().ByNumber(0); zero != nil {
		name = strings.TrimPrefix(name, strings.TrimSuffix(string(zero.Name()), "UNSPECIFIED"))
	}
	return strings.ToLower(name)
}

// printJSON writes v as one JSON line.
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

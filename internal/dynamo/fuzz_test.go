package dynamo_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// itemFromJSON reads DynamoDB JSON ({"pk":{"S":"k"},...}) into an item.
func itemFromJSON(data []byte) (map[string]types.AttributeValue, bool) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(data, &raw) != nil {
		return nil, false
	}
	out := make(map[string]types.AttributeValue, len(raw))
	for k, v := range raw {
		av, ok := valueFromJSON(v, 0)
		if !ok {
			return nil, false
		}
		out[k] = av
	}
	return out, true
}

func valueFromJSON(data []byte, depth int) (types.AttributeValue, bool) {
	var typed map[string]json.RawMessage
	if depth > 8 || json.Unmarshal(data, &typed) != nil || len(typed) != 1 {
		return nil, false
	}
	for t, v := range typed {
		switch t {
		case "S", "N":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, false
			}
			if t == "S" {
				return &types.AttributeValueMemberS{Value: s}, true
			}
			return &types.AttributeValueMemberN{Value: s}, true
		case "B":
			var b []byte
			if json.Unmarshal(v, &b) != nil {
				return nil, false
			}
			return &types.AttributeValueMemberB{Value: b}, true
		case "BOOL":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return nil, false
			}
			return &types.AttributeValueMemberBOOL{Value: b}, true
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: true}, true
		case "SS", "NS":
			var l []string
			if json.Unmarshal(v, &l) != nil {
				return nil, false
			}
			if t == "SS" {
				return &types.AttributeValueMemberSS{Value: l}, true
			}
			return &types.AttributeValueMemberNS{Value: l}, true
		case "L":
			var l []json.RawMessage
			if json.Unmarshal(v, &l) != nil {
				return nil, false
			}
			out := &types.AttributeValueMemberL{}
			for _, e := range l {
				av, ok := valueFromJSON(e, depth+1)
				if !ok {
					return nil, false
				}
				out.Value = append(out.Value, av)
			}
			return out, true
		case "M":
			var m map[string]json.RawMessage
			if json.Unmarshal(v, &m) != nil {
				return nil, false
			}
			out := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
			for k, e := range m {
				av, ok := valueFromJSON(e, depth+1)
				if !ok {
					return nil, false
				}
				out.Value[k] = av
			}
			return out, true
		}
	}
	return nil, false
}

// FuzzDecode feeds arbitrary items to the codec: it never panics, and any
// item it cannot read is reported as malformed, with a reason.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"pk":{"S":"k"},"queue":{"S":"q"},"payload":{"S":"x"},"status":{"S":"pending"},"attempt":{"N":"0"}}`,
		`{"pk":{"S":"k"},"queue":{"S":"q"},"payload":{"B":"AP8="},"status":{"S":"failed"},"attempt":{"N":"3"},"errors":{"L":[{"M":{"at":{"N":"1"},"attempt":{"N":"1"},"message":{"S":"boom"}}}]}}`,
		`{"pk":{"N":"1"}}`,
		`{"attempt":{"S":"one"},"status":{"N":"7"}}`,
		`{"pk":{"S":"k"},"attributes":{"M":{"a":{"L":[]}}},"due_at":{"N":"1e400"}}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		item, ok := itemFromJSON(data)
		if !ok {
			return
		}
		row, err := dynamo.Decode(item)
		if err != nil {
			if !errors.Is(err, dynamo.ErrMalformed) || err.Error() == dynamo.ErrMalformed.Error() {
				t.Fatalf("decode error %q must wrap ErrMalformed and say why", err)
			}
			return
		}
		if row.Key == "" || row.Queue == "" || !row.Status.Valid() || row.Payload == nil {
			t.Fatalf("decoded an incomplete row without error: %+v", row)
		}
		// A row that decodes re-encodes and decodes to itself.
		again, err := dynamo.Encode(row, 4)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := dynamo.Decode(again)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(row) {
			t.Fatalf("round trip changed the row: %v\n%+v\n%+v", err, row, back)
		}
	})
}

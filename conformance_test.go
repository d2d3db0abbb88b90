package outflow_test

// The Go producer held to the shared conformance vectors in
// conformance/producer (conformance/README.md says what each file holds).
// The Python package's tests read the same files: a vector one language
// fails is a bug in that language.
//
// The producer has no hook to pin its clock, its stage ids or its
// generated keys from outside the package, so what they give is checked
// by its rule here (created_at within the call, due_at the later of it and
// not_before, stage_id 16 base32 characters, a key a ULID of the call's
// time and its shard that key's) and then set to the vector's pinned
// values, so that everything else compares exactly.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// conformanceKinds maps each language-neutral error kind of the vectors to
// the Go producer's sentinel.
var conformanceKinds = map[string]error{
	"empty_queue":          outflow.ErrEmptyQueue,
	"invalid_key":          outflow.ErrInvalidKey,
	"empty_payload":        outflow.ErrEmptyPayload,
	"too_large":            outflow.ErrPayloadTooLarge,
	"too_many_attributes":  outflow.ErrTooManyAttributes,
	"attribute_name":       outflow.ErrAttributeName,
	"attribute_value":      outflow.ErrAttributeValue,
	"group_required":       outflow.ErrGroupRequired,
	"invalid_id":           outflow.ErrInvalidGroup,
	"group_not_fifo":       outflow.ErrGroupNotFIFO,
	"not_json":             outflow.ErrNotJSON,
	"event_field":          outflow.ErrEventField,
	"item_too_large":       outflow.ErrItemTooLarge,
	"no_route":             outflow.ErrNoRoute,
	"ordered_route":        outflow.ErrOrderedRoute,
	"duplicate_key":        outflow.ErrDuplicateKey,
	"too_many_items":       outflow.ErrTooManyItems,
	"order_unknown":        outflow.ErrOrderUnknown,
	"key_conflict":         outflow.ErrKeyConflict,
	"not_staged":           outflow.ErrNotStaged,
	"group_race":           outflow.ErrGroupRace,
	"already_staged":       outflow.ErrAlreadyStaged,
	"key_gone":             outflow.ErrKeyGone,
	"condition_failed":     outflow.ErrConditionFailed,
	"transaction_conflict": outflow.ErrTransactionConflict,
	"throttled":            outflow.ErrThrottled,
	"not_published":        outflow.ErrNotPublished,
	"published_mismatch":   outflow.ErrPublishedMismatch,
}

// Kinds with no sentinel in Go: NewProducer's refusals, a published item
// it cannot read, and a canceled transaction (a *TransactError).
const (
	kindInvalidConfig = "invalid_config"
	kindMalformed     = "malformed"
	kindCanceled      = "transaction_canceled"
)

// validationKinds are the kinds of every validation error the Go producer
// has (its Validation errors, ErrOrderUnknown and NewProducer's refusals):
// invalid.json must give each one at least once.
var validationKinds = []string{
	"empty_queue", "invalid_key", "empty_payload", "too_large", "too_many_attributes", "attribute_name",
	"attribute_value", "group_required", "invalid_id", "group_not_fifo", "not_json", "event_field", "item_too_large", "no_route",
	"ordered_route", "duplicate_key", "too_many_items", "order_unknown", kindInvalidConfig,
}

func readVectors(t *testing.T, name string) []json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("conformance", "producer", name))
	require.NoError(t, err, "the conformance vectors are part of the repository")
	var file struct {
		Vectors []json.RawMessage `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(data, &file), name)
	require.NotEmpty(t, file.Vectors, "%s holds no vectors", name)
	return file.Vectors
}

// TestConformance_VectorsAreAllThere fails on a vector file cut short:
// the Python and TypeScript suites assert the same counts (the table in
// conformance/README.md).
func TestConformance_VectorsAreAllThere(t *testing.T) {
	t.Parallel()
	for name, least := range map[string]int{"rows.json": 29, "invalid.json": 142, "classify.json": 22, "published.json": 24, "live.json": 8, "content.json": 8} {
		require.GreaterOrEqual(t, len(readVectors(t, name)), least, name)
	}
}

type vConfig struct {
	Table           string            `json:"table"`
	Shards          int               `json:"shards"`
	MaxMessageBytes int               `json:"max_message_bytes"`
	Ordered         []string          `json:"ordered"` // null: read from the published configuration
	Routes          map[string]string `json:"routes"`
	Lean            bool              `json:"lean"` // absent: false
}

func (c vConfig) config() outflow.Config {
	cfg := outflow.Config{Table: c.Table, Shards: c.Shards, MaxMessageBytes: c.MaxMessageBytes, Ordered: c.Ordered, Lean: c.Lean}
	cfg.Routes = routesString(c.Routes)
	return cfg
}

func routesString(routes map[string]string) string {
	parts := make([]string, 0, len(routes))
	for _, name := range slices.Sorted(maps.Keys(routes)) {
		parts = append(parts, name+"="+routes[name])
	}
	return strings.Join(parts, ",")
}

// vPayload is a payload as a vector writes it: text, base64, text or
// base64 repeated, or parts of these joined.
type vPayload struct {
	Text         *string    `json:"text"`
	Base64       *string    `json:"base64"`
	Repeat       *string    `json:"repeat"`
	RepeatBase64 *string    `json:"repeat_base64"`
	Times        int        `json:"times"`
	Parts        []vPayload `json:"parts"`
}

func (p vPayload) bytes(t *testing.T) []byte {
	switch {
	case p.Parts != nil:
		var out []byte
		for _, part := range p.Parts {
			out = append(out, part.bytes(t)...)
		}
		return out
	case p.RepeatBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*p.RepeatBase64)
		require.NoError(t, err)
		return []byte(strings.Repeat(string(b), p.Times))
	case p.Text != nil:
		return []byte(*p.Text)
	case p.Base64 != nil:
		b, err := base64.StdEncoding.DecodeString(*p.Base64)
		require.NoError(t, err)
		return b
	case p.Repeat != nil:
		return []byte(strings.Repeat(*p.Repeat, p.Times))
	}
	t.Fatalf("payload with neither text, base64, repeat nor parts")
	return nil
}

type vRow struct {
	Key         string            `json:"key"`
	Queue       string            `json:"queue"`
	Payload     vPayload          `json:"payload"`
	Attributes  map[string]string `json:"attributes"`
	Group       string            `json:"group"`
	NotBeforeMs *int64            `json:"not_before_ms"`
	TraceParent string            `json:"trace_parent"`
}

func (r vRow) row(t *testing.T) outflow.Row {
	row := outflow.Row{Key: r.Key, Queue: r.Queue, Payload: r.Payload.bytes(t), Attributes: r.Attributes, Group: r.Group, TraceParent: r.TraceParent}
	if r.NotBeforeMs != nil {
		row.NotBefore = time.UnixMilli(*r.NotBeforeMs)
	}
	return row
}

func vRows(t *testing.T, rows []vRow, repeat int) []outflow.Row {
	out := make([]outflow.Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.row(t))
	}
	all := slices.Clone(out)
	for i := 1; i < repeat; i++ {
		all = append(all, out...)
	}
	return all
}

// av reads a value in DynamoDB JSON (B in base64).
func av(t *testing.T, v map[string]any) types.AttributeValue {
	t.Helper()
	require.Len(t, v, 1, "a value has one type: %v", v)
	for typ, raw := range v {
		switch typ {
		case "S":
			return &types.AttributeValueMemberS{Value: raw.(string)}
		case "N":
			return &types.AttributeValueMemberN{Value: raw.(string)}
		case "B":
			b, err := base64.StdEncoding.DecodeString(raw.(string))
			require.NoError(t, err)
			return &types.AttributeValueMemberB{Value: b}
		case "BOOL":
			return &types.AttributeValueMemberBOOL{Value: raw.(bool)}
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: true}
		case "L":
			var l []types.AttributeValue
			for _, e := range raw.([]any) {
				l = append(l, av(t, e.(map[string]any)))
			}
			return &types.AttributeValueMemberL{Value: l}
		case "M":
			return &types.AttributeValueMemberM{Value: avItem(t, raw.(map[string]any))}
		}
		t.Fatalf("unknown type %s", typ)
	}
	return nil
}

func avItem(t *testing.T, m map[string]any) map[string]types.AttributeValue {
	t.Helper()
	if m == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = av(t, v.(map[string]any))
	}
	return out
}

// avJSON writes a value in DynamoDB JSON, as json.Unmarshal reads it.
func avJSON(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}
	case *types.AttributeValueMemberL:
		l := []any{}
		for _, e := range v.Value {
			l = append(l, avJSON(e))
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		return map[string]any{"M": itemJSON(v.Value)}
	}
	return map[string]any{"?": fmt.Sprintf("%T", v)}
}

func itemJSON(item map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = avJSON(v)
	}
	return out
}

var exprToken = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// resolveExpr replaces an expression's placeholders (#n by the name, :v
// by the value: a string quoted as JSON, a number as it is) and drops the
// whitespace outside strings: the form the vectors compare.
func resolveExpr(expr *string, names map[string]string, values map[string]types.AttributeValue) string {
	out := exprToken.ReplaceAllStringFunc(aws.ToString(expr), func(tok string) string {
		if tok[0] == '#' {
			return names[tok]
		}
		switch v := values[tok].(type) {
		case *types.AttributeValueMemberS:
			b, _ := json.Marshal(v.Value)
			return string(b)
		case *types.AttributeValueMemberN:
			return v.Value
		}
		return tok
	})
	return canonicalExpr(out)
}

func canonicalExpr(expr string) string {
	var b strings.Builder
	quoted, escaped := false, false
	for _, r := range expr {
		switch {
		case quoted:
			b.WriteRune(r)
			if escaped {
				escaped = false
			} else if r == '\\' {
				escaped = true
			} else if r == '"' {
				quoted = false
			}
		case r == '"':
			quoted = true
			b.WriteRune(r)
		case !unicode.IsSpace(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// shapeOf is a transaction item as the vectors compare it.
func shapeOf(item types.TransactWriteItem) map[string]any {
	body := map[string]any{}
	var op string
	switch {
	case item.Put != nil:
		op = "Put"
		body["TableName"] = aws.ToString(item.Put.TableName)
		body["Item"] = itemJSON(item.Put.Item)
		body["ConditionExpression"] = resolveExpr(item.Put.ConditionExpression, item.Put.ExpressionAttributeNames, item.Put.ExpressionAttributeValues)
		body["ReturnValuesOnConditionCheckFailure"] = string(item.Put.ReturnValuesOnConditionCheckFailure)
	case item.Update != nil:
		op = "Update"
		body["TableName"] = aws.ToString(item.Update.TableName)
		body["Key"] = itemJSON(item.Update.Key)
		body["ConditionExpression"] = resolveExpr(item.Update.ConditionExpression, item.Update.ExpressionAttributeNames, item.Update.ExpressionAttributeValues)
		body["UpdateExpression"] = resolveExpr(item.Update.UpdateExpression, item.Update.ExpressionAttributeNames, item.Update.ExpressionAttributeValues)
		body["ReturnValuesOnConditionCheckFailure"] = string(item.Update.ReturnValuesOnConditionCheckFailure)
	default:
		op = "Other"
	}
	return map[string]any{op: body}
}

// expectedShape is a vector's transaction item with its expressions in
// the compared form.
func expectedShape(item map[string]any) map[string]any {
	for _, body := range item {
		b := body.(map[string]any)
		for _, f := range []string{"ConditionExpression", "UpdateExpression"} {
			if s, ok := b[f].(string); ok {
				b[f] = canonicalExpr(s)
			}
		}
	}
	return item
}

// ownItem reads a transaction item a vector gives as the caller's own.
func ownItem(t *testing.T, table string, m map[string]any) types.TransactWriteItem {
	t.Helper()
	sub := func(s any) *string {
		if s == nil {
			return nil
		}
		return aws.String(strings.ReplaceAll(s.(string), "${table}", table))
	}
	names := func(b map[string]any) map[string]string {
		n, _ := b["ExpressionAttributeNames"].(map[string]any)
		if n == nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range n {
			out[k] = v.(string)
		}
		return out
	}
	values := func(b map[string]any) map[string]types.AttributeValue {
		v, _ := b["ExpressionAttributeValues"].(map[string]any)
		return avItem(t, v)
	}
	item := func(b map[string]any, f string) map[string]types.AttributeValue {
		v, _ := b[f].(map[string]any)
		return avItem(t, v)
	}
	var out types.TransactWriteItem
	for op, raw := range m {
		b := raw.(map[string]any)
		switch op {
		case "Put":
			out.Put = &types.Put{TableName: sub(b["TableName"]), Item: item(b, "Item"), ConditionExpression: sub(b["ConditionExpression"]),
				ExpressionAttributeNames: names(b), ExpressionAttributeValues: values(b)}
		case "Update":
			out.Update = &types.Update{TableName: sub(b["TableName"]), Key: item(b, "Key"), UpdateExpression: sub(b["UpdateExpression"]),
				ConditionExpression: sub(b["ConditionExpression"]), ExpressionAttributeNames: names(b), ExpressionAttributeValues: values(b)}
		case "ConditionCheck":
			out.ConditionCheck = &types.ConditionCheck{TableName: sub(b["TableName"]), Key: item(b, "Key"), ConditionExpression: sub(b["ConditionExpression"]),
				ExpressionAttributeNames: names(b), ExpressionAttributeValues: values(b)}
		case "Delete":
			out.Delete = &types.Delete{TableName: sub(b["TableName"]), Key: item(b, "Key")}
		default:
			t.Fatalf("unknown transaction item %s", op)
		}
	}
	return out
}

// fakeTable is a DynamoDB whose GetItem finds a vector's items; it writes
// nothing.
type fakeTable struct {
	items map[string]map[string]types.AttributeValue
}

func newFakeTable(t *testing.T, items []map[string]any) *fakeTable {
	f := &fakeTable{items: map[string]map[string]types.AttributeValue{}}
	for _, it := range items {
		item := avItem(t, it)
		f.items[item["pk"].(*types.AttributeValueMemberS).Value] = item
	}
	return f
}

func (f *fakeTable) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if !aws.ToBool(in.ConsistentRead) {
		return nil, errors.New("reads must be strongly consistent")
	}
	return &dynamodb.GetItemOutput{Item: f.items[in.Key["pk"].(*types.AttributeValueMemberS).Value]}, nil
}

func (f *fakeTable) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errors.New("the offline vectors write nothing")
}

func (f *fakeTable) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, errors.New("the offline vectors write nothing")
}

// traceCtx is a context carrying a vector's trace, as Lambda's X-Ray
// header.
func traceCtx(trace map[string]string) context.Context {
	ctx := context.Background()
	if h := trace["xray"]; h != "" {
		//lint:ignore SA1029 aws-lambda-go keys the trace header with this plain string
		ctx = context.WithValue(ctx, "x-amzn-trace-id", h)
	}
	return ctx
}

var (
	stageIDForm = regexp.MustCompile(`^[A-Z2-7]{16}$`)
	ulidForm    = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
)

// settleVolatile checks an item's created_at (within [from, to]), due_at
// and stage_id by their rules, then sets them to want's. With generated,
// its key too: a ULID of the call's time, its shard that key's (none when
// want has none: a lean row).
func settleVolatile(t *testing.T, got, want map[string]any, from, to time.Time, shards int, generated bool) {
	t.Helper()
	num := func(item map[string]any, name string) int64 {
		v, ok := item[name].(map[string]any)
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(v["N"].(string), 10, 64)
		require.NoError(t, err)
		return n
	}
	require.Regexp(t, stageIDForm, got["stage_id"].(map[string]any)["S"])
	created := num(got, "created_at")
	if !from.IsZero() {
		require.GreaterOrEqual(t, created, from.UnixMilli(), "created_at is the staging time")
		require.LessOrEqual(t, created, to.UnixMilli(), "created_at is the staging time")
	}
	require.Equal(t, max(created, num(got, "not_before")), num(got, "due_at"), "due_at is the later of now and not_before")
	if generated {
		key := got["pk"].(map[string]any)["S"].(string)
		require.Regexp(t, ulidForm, key)
		id, err := ulid.ParseStrict(key)
		require.NoError(t, err)
		if !from.IsZero() {
			require.GreaterOrEqual(t, int64(id.Time()), from.UnixMilli())
			require.LessOrEqual(t, int64(id.Time()), to.UnixMilli())
		}
		if _, indexed := want["shard"]; !indexed {
			require.NotContains(t, got, "shard", "a lean row is staged outside the due index")
			got["pk"] = want["pk"]
		} else {
			require.Equal(t, dynamo.ShardOf(key, shards), got["shard"].(map[string]any)["S"])
			got["pk"], got["shard"] = want["pk"], want["shard"]
		}
	}
	for _, name := range []string{"created_at", "due_at", "stage_id"} {
		got[name] = want[name]
	}
}

// normal is v as json.Unmarshal gives it, for comparing.
func normal(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func TestConformance_RowsBecomeTheirItems(t *testing.T) {
	t.Parallel()
	for _, raw := range readVectors(t, "rows.json") {
		var v struct {
			Name         string            `json:"name"`
			Call         string            `json:"call"`
			Config       vConfig           `json:"config"`
			Table        []map[string]any  `json:"table"`
			ContextTrace map[string]string `json:"context_trace"`
			Rows         []vRow            `json:"rows"`
			GeneratedKey bool              `json:"generated_key"`
			Items        []map[string]any  `json:"items"`
		}
		require.NoError(t, json.Unmarshal(raw, &v))
		t.Run(v.Name, func(t *testing.T) {
			p, err := outflow.NewProducer(newFakeTable(t, v.Table), v.Config.config())
			require.NoError(t, err)
			rows := vRows(t, v.Rows, 1)
			from := time.Now()
			var items []types.TransactWriteItem
			switch v.Call {
			case "transact_item":
				require.Len(t, rows, 1)
				item, err := p.TransactItem(rows[0])
				require.NoError(t, err)
				items = []types.TransactWriteItem{item}
			case "transact_items":
				items, err = p.TransactItems(traceCtx(v.ContextTrace), rows...)
				require.NoError(t, err)
			default:
				t.Fatalf("unknown call %q", v.Call)
			}
			to := time.Now()
			require.Len(t, items, len(v.Items))
			shards := v.Config.Shards
			if shards == 0 {
				shards = 4
			}
			for i, item := range items {
				got := normal(t, shapeOf(item)).(map[string]any)
				want := expectedShape(normal(t, v.Items[i]).(map[string]any))
				if put, ok := got["Put"].(map[string]any); ok {
					wantPut, ok := want["Put"].(map[string]any)
					require.True(t, ok, "item %d: a put, want %v", i, want)
					settleVolatile(t, put["Item"].(map[string]any), wantPut["Item"].(map[string]any), from, to, shards, v.GeneratedKey)
				}
				require.Equal(t, want, got, "item %d", i)
			}
		})
	}
}

func TestConformance_InvalidRowsGiveTheirKind(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, raw := range readVectors(t, "invalid.json") {
		var v struct {
			Name   string           `json:"name"`
			Call   string           `json:"call"`
			Config vConfig          `json:"config"`
			Table  []map[string]any `json:"table"`
			Rows   []vRow           `json:"rows"`
			Repeat int              `json:"repeat"`
			Kind   *string          `json:"kind"`
		}
		require.NoError(t, json.Unmarshal(raw, &v))
		if v.Kind != nil {
			covered[*v.Kind] = true
		}
		t.Run(v.Name, func(t *testing.T) {
			var err error
			p, perr := outflow.NewProducer(newFakeTable(t, v.Table), v.Config.config())
			rows := vRows(t, v.Rows, max(v.Repeat, 1))
			switch v.Call {
			case "new_producer":
				err = perr
			case "validate":
				require.Len(t, rows, 1)
				err = rows[0].Validate(v.Config.MaxMessageBytes)
			case "transact_item":
				require.NoError(t, perr)
				require.Len(t, rows, 1)
				_, err = p.TransactItem(rows[0])
			case "transact_items":
				require.NoError(t, perr)
				_, err = p.TransactItems(context.Background(), rows...)
			default:
				t.Fatalf("unknown call %q", v.Call)
			}
			if v.Kind == nil {
				require.NoError(t, err, "a row at the limit is staged")
				return
			}
			requireKind(t, err, *v.Kind)
		})
	}
	for _, kind := range validationKinds {
		require.True(t, covered[kind], "invalid.json has no vector of kind %s", kind)
	}
}

// requireKind asserts err is of kind: the sentinel's errors.Is, and no
// other validation sentinel's.
func requireKind(t *testing.T, err error, kind string) {
	t.Helper()
	require.Error(t, err, "want %s", kind)
	switch kind {
	case kindInvalidConfig:
		// NewProducer's refusals have no sentinel of their own (an
		// EventBridge option's wraps ErrEventField).
		return
	case kindMalformed:
		require.NotErrorIs(t, err, outflow.ErrNotPublished)
		return
	case kindCanceled:
		var txErr *outflow.TransactError
		require.ErrorAs(t, err, &txErr)
		return
	}
	sentinel, ok := conformanceKinds[kind]
	require.True(t, ok, "unknown kind %q", kind)
	require.ErrorIs(t, err, sentinel, "want %s", kind)
	for name, other := range conformanceKinds {
		if name != kind && other != sentinel && slices.Contains(validationKinds, name) {
			require.NotErrorIs(t, err, other, "%s, not also %s: %v", kind, name, err)
		}
	}
}

func TestConformance_ClassifyExplainsACancellation(t *testing.T) {
	t.Parallel()
	for _, raw := range readVectors(t, "classify.json") {
		var v struct {
			Name    string           `json:"name"`
			Config  vConfig          `json:"config"`
			Table   []map[string]any `json:"table"`
			Own     []map[string]any `json:"own"`
			Rows    []vRow           `json:"rows"`
			Reasons []struct {
				Code    string         `json:"Code"`
				Message string         `json:"Message"`
				Item    map[string]any `json:"Item"`
			} `json:"reasons"`
			Expect struct {
				Items []struct {
					Index  int     `json:"index"`
					Code   string  `json:"code"`
					Reason *string `json:"reason"`
					Table  string  `json:"table"`
					Row    string  `json:"row"`
					Queue  string  `json:"queue"`
					Group  string  `json:"group"`
				} `json:"items"`
				Retryable bool `json:"retryable"`
			} `json:"expect"`
		}
		require.NoError(t, json.Unmarshal(raw, &v))
		t.Run(v.Name, func(t *testing.T) {
			p, err := outflow.NewProducer(newFakeTable(t, v.Table), v.Config.config())
			require.NoError(t, err)
			var items []types.TransactWriteItem
			for _, own := range v.Own {
				items = append(items, ownItem(t, v.Config.Table, own))
			}
			staged, err := p.TransactItems(context.Background(), vRows(t, v.Rows, 1)...)
			require.NoError(t, err)
			items = append(items, staged...)
			canceled := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled")}
			for _, r := range v.Reasons {
				reason := types.CancellationReason{Code: aws.String(r.Code), Item: avItem(t, r.Item)}
				if r.Message != "" {
					reason.Message = aws.String(r.Message)
				}
				canceled.CancellationReasons = append(canceled.CancellationReasons, reason)
			}
			err = p.Classify(context.Background(), fmt.Errorf("send: %w", canceled), items)
			var txErr *outflow.TransactError
			require.ErrorAs(t, err, &txErr)
			require.Len(t, txErr.Items, len(v.Expect.Items))
			for i, want := range v.Expect.Items {
				got := txErr.Items[i]
				require.Equal(t, want.Index, got.Index, "item %d", i)
				require.Equal(t, want.Code, got.Code, "item %d", i)
				require.Equal(t, want.Table, got.Table, "item %d", i)
				require.Equal(t, want.Row, got.Row, "item %d", i)
				require.Equal(t, want.Queue, got.Queue, "item %d", i)
				require.Equal(t, want.Group, got.Group, "item %d", i)
				if want.Reason == nil {
					require.NoError(t, got.Reason, "item %d: a code Outflow does not explain", i)
					continue
				}
				require.ErrorIs(t, got.Reason, conformanceKinds[*want.Reason], "item %d", i)
				require.ErrorIs(t, err, conformanceKinds[*want.Reason], "the TransactError wraps item %d's reason", i)
			}
			require.Equal(t, v.Expect.Retryable, txErr.Retryable())
		})
	}
}

// TestConformance_ContentDigest: the digest a tombstone keeps of the
// payload and attributes its settle dropped is the one every producer
// computes to compare a retry of a delivered key with it.
func TestConformance_ContentDigest(t *testing.T) {
	t.Parallel()
	for _, raw := range readVectors(t, "content.json") {
		var v struct {
			Name       string            `json:"name"`
			Payload    vPayload          `json:"payload"`
			Attributes map[string]string `json:"attributes"`
			Digest     string            `json:"digest"`
		}
		require.NoError(t, json.Unmarshal(raw, &v))
		t.Run(v.Name, func(t *testing.T) {
			require.Equal(t, v.Digest, dynamo.ContentDigest(outbox.Row{Payload: v.Payload.bytes(t), Attributes: v.Attributes}))
		})
	}
}

func TestConformance_PublishedConfiguration(t *testing.T) {
	t.Parallel()
	for _, raw := range readVectors(t, "published.json") {
		var v struct {
			Name   string         `json:"name"`
			Item   map[string]any `json:"item"`
			Apply  vConfig        `json:"apply"`
			Kind   *string        `json:"kind"`
			Expect *struct {
				Routes          map[string]string `json:"routes"`
				Ordered         map[string]string `json:"ordered"`
				Shards          int               `json:"shards"`
				MaxMessageBytes int               `json:"max_message_bytes"`
				Revision        int64             `json:"revision"`
				PublishedAtMs   int64             `json:"published_at_ms"`
				PublishedBy     string            `json:"published_by"`
				Lean            bool              `json:"lean"` // absent: false
				Config          vConfig           `json:"config"`
			} `json:"expect"`
		}
		require.NoError(t, json.Unmarshal(raw, &v))
		t.Run(v.Name, func(t *testing.T) {
			var table []map[string]any
			if v.Item != nil {
				table = append(table, v.Item)
			}
			pub, err := outflow.LoadPublished(context.Background(), newFakeTable(t, table), "outbox")
			if err == nil {
				var cfg outflow.Config
				cfg, err = pub.Apply(v.Apply.config())
				if err == nil && v.Expect != nil {
					want := v.Expect.Config
					require.Equal(t, want.Table, cfg.Table)
					require.Equal(t, want.Shards, cfg.Shards)
					require.Equal(t, want.MaxMessageBytes, cfg.MaxMessageBytes)
					// Go's Apply leaves Ordered nil, not empty, when none is
					// published: the producer then reads the published
					// configuration again for a FIFO row, and finds none
					// ordered. The same routes are ordered either way.
					require.Equal(t, len(want.Ordered), len(cfg.Ordered))
					if len(want.Ordered) > 0 {
						require.Equal(t, want.Ordered, cfg.Ordered)
					}
					require.Equal(t, routesString(want.Routes), cfg.Routes)
					require.Equal(t, want.Lean, cfg.Lean, "the Config applied is lean")
				}
			}
			if v.Kind != nil {
				requireKind(t, err, *v.Kind)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, v.Expect, "a vector that loads says what it loads")
			require.Equal(t, v.Expect.Routes, pub.Routes)
			require.Equal(t, v.Expect.Ordered, pub.Ordered)
			require.Equal(t, v.Expect.Shards, pub.Shards)
			require.Equal(t, v.Expect.MaxMessageBytes, pub.MaxMessageBytes)
			require.Equal(t, v.Expect.Revision, pub.Revision)
			require.Equal(t, v.Expect.PublishedAtMs, pub.PublishedAt.UnixMilli())
			require.Equal(t, v.Expect.PublishedBy, pub.PublishedBy)
			require.Equal(t, v.Expect.Lean, pub.Lean, "the dispatcher runs lean")
		})
	}
}

// A live scenario: steps against the test endpoint (moto), then the items
// the table must hold.
type liveScenario struct {
	Name   string  `json:"name"`
	Config vConfig `json:"config"`
	Steps  []struct {
		Op    string           `json:"op"`
		Name  string           `json:"name"`
		Rows  []vRow           `json:"rows"`
		Own   []map[string]any `json:"own"`
		Key   string           `json:"key"`
		Kinds []*string        `json:"kinds"`
		Kind  *string          `json:"kind"`
		Items []struct {
			Index  int     `json:"index"`
			Reason *string `json:"reason"`
		} `json:"items"`
		Retryable *bool  `json:"retryable"`
		Content   string `json:"content"`
	} `json:"steps"`
	ExpectTable []map[string]any `json:"expect_table"`
	Absent      []string         `json:"absent"`
}

func TestConformance_LiveScenarios(t *testing.T) {
	t.Parallel()
	for _, raw := range readVectors(t, "live.json") {
		var v liveScenario
		require.NoError(t, json.Unmarshal(raw, &v))
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			runLive(t, v)
		})
	}
}

func runLive(t *testing.T, v liveScenario) {
	ctx := context.Background()
	client := awstest.DynamoDB(t)
	table := awstest.NewTable(t)
	cfg := v.Config.config()
	cfg.Table = table
	p, err := outflow.NewProducer(client, cfg)
	require.NoError(t, err)
	prepared := map[string][]types.TransactWriteItem{}
	for i, step := range v.Steps {
		rows := vRows(t, step.Rows, 1)
		switch step.Op {
		case "put":
			_, err := p.Put(ctx, rows...)
			failing := false
			for j, kind := range step.Kinds {
				if kind != nil {
					failing = true
					require.ErrorIs(t, err, conformanceKinds[*kind], "step %d row %d", i, j)
				}
			}
			if !failing {
				require.NoError(t, err, "step %d", i)
			}
		case "transact":
			var own []types.TransactWriteItem
			for _, o := range step.Own {
				own = append(own, ownItem(t, table, o))
			}
			_, err := p.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: own}, rows...)
			checkLiveTxErr(t, i, err, step.Kind, step.Items, step.Retryable)
		case "prepare":
			items, err := p.TransactItems(ctx, rows...)
			require.NoError(t, err, "step %d", i)
			prepared[step.Name] = items
		case "send":
			items := prepared[step.Name]
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			err = p.Classify(ctx, err, items)
			checkLiveTxErr(t, i, err, step.Kind, step.Items, step.Retryable)
		case "arm_conflict":
			armConflict(t, table, step.Key)
		case "settle_done":
			settleDone(t, client, table, v.Config.Shards, step.Key, step.Content)
		default:
			t.Fatalf("step %d: unknown op %q", i, step.Op)
		}
	}
	for _, want := range v.ExpectTable {
		want = normal(t, want).(map[string]any)
		key := want["pk"].(map[string]any)["S"].(string)
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}})
		require.NoError(t, err)
		require.NotEmpty(t, out.Item, "%s is staged", key)
		got := normal(t, itemJSON(out.Item)).(map[string]any)
		if _, isRow := want["stage_id"]; isRow {
			settleVolatile(t, got, want, time.Time{}, time.Time{}, 0, false)
		}
		require.Equal(t, want, got, "item %s", key)
	}
	for _, key := range v.Absent {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}})
		require.NoError(t, err)
		require.Empty(t, out.Item, "%s is not staged", key)
	}
}

func checkLiveTxErr(t *testing.T, step int, err error, kind *string, items []struct {
	Index  int     `json:"index"`
	Reason *string `json:"reason"`
}, retryable *bool) {
	t.Helper()
	if kind == nil {
		require.NoError(t, err, "step %d", step)
		return
	}
	requireKind(t, err, *kind)
	var txErr *outflow.TransactError
	if !errors.As(err, &txErr) {
		return
	}
	require.Len(t, txErr.Items, len(items), "step %d: %v", step, err)
	for j, want := range items {
		require.Equal(t, want.Index, txErr.Items[j].Index, "step %d", step)
		if want.Reason == nil {
			require.NoError(t, txErr.Items[j].Reason)
		} else {
			require.ErrorIs(t, txErr.Items[j].Reason, conformanceKinds[*want.Reason], "step %d item %d", step, j)
		}
	}
	if retryable != nil {
		require.Equal(t, *retryable, txErr.Retryable(), "step %d", step)
	}
}

// settleDone settles key's row to done as the dispatcher's wake does
// (unclaimed) under the default retention, by the store's own Done, and
// checks the tombstone it leaves: content, the digest the vector gives, and
// neither payload nor attributes.
func settleDone(t *testing.T, client dynamo.API, table string, shards int, key, content string) {
	t.Helper()
	ctx := context.Background()
	if shards == 0 {
		shards = 4
	}
	s, err := dynamo.New(client, dynamo.Config{Table: table, Shards: shards, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	row, err := s.Get(ctx, key)
	require.NoError(t, err)
	require.NotNil(t, row, "%s is staged", key)
	row.Unclaimed = true
	require.NoError(t, s.Done(ctx, *row, time.Now()))
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: key}}})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: string(outbox.StatusDone)}, out.Item[dynamo.AttrStatus])
	require.Equal(t, &types.AttributeValueMemberS{Value: content}, out.Item[dynamo.AttrContent], "the tombstone's digest")
	require.NotContains(t, out.Item, dynamo.AttrPayload)
	require.NotContains(t, out.Item, dynamo.AttrAttributes)
}

// armConflict makes the patched moto server cancel the next transaction
// that touches key with a TransactionConflict.
func armConflict(t *testing.T, table, key string) {
	t.Helper()
	if os.Getenv(awstest.EndpointEnv) != "" {
		t.Skip("arming a transaction conflict needs the project's moto server")
	}
	u := awstest.Endpoint() + "/outflow-faults/transaction-conflict?table=" + table + "&key=" + strings.ReplaceAll(key, " ", "%20")
	resp, err := http.Post(u, "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

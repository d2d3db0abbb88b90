package bench

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Requests counts AWS requests by "Service.Operation" and keeps what the
// write-unit arithmetic needs: the size of every item staged, and the kind
// of every write.
type Requests struct {
	mu     sync.Mutex
	counts map[string]int
	sizes  map[string]int // key -> item size in bytes, from its PutItem
	writes []write
}

type write struct {
	kind string // stage, group, claim, done, settle (unclaimed done), retry, fail, release, other
	key  string
	// tx marks a write made inside TransactWriteItems, which DynamoDB
	// bills twice (prepare and commit).
	tx bool
}

// NewRequests returns an empty counter.
func NewRequests() *Requests {
	return &Requests{counts: map[string]int{}, sizes: map[string]int{}}
}

// Instrument adds the counting middleware to cfg: every client made from
// it is counted.
func (r *Requests) Instrument(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("outflow-bench-count",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				r.record(awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx), in.Parameters)
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

func (r *Requests) record(op string, params any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[op]++
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		key := keyOf(in.Item)
		r.sizes[key] = ItemSize(in.Item)
		r.writes = append(r.writes, write{kind: "stage", key: key})
	case *dynamodb.UpdateItemInput:
		r.writes = append(r.writes, write{kind: updateKind(in), key: keyOf(in.Key)})
	case *dynamodb.DeleteItemInput:
		kind := "done"
		if slices.Contains(slices.Collect(maps.Values(in.ExpressionAttributeNames)), "claimed_at") {
			// The wake's settle of a row it sent unclaimed: its condition
			// is that no claim ever wrote the row.
			kind = "settle"
		}
		r.writes = append(r.writes, write{kind: kind, key: keyOf(in.Key)})
	case *dynamodb.TransactWriteItemsInput:
		// An ordered row's staging: the row's put and its group item's
		// update (the group item's size is its key and what the update
		// sets).
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				key := keyOf(it.Put.Item)
				r.sizes[key] = ItemSize(it.Put.Item)
				r.writes = append(r.writes, write{kind: "stage", key: key, tx: true})
			case it.Update != nil:
				key := keyOf(it.Update.Key)
				size := ItemSize(it.Update.Key)
				for _, n := range it.Update.ExpressionAttributeNames {
					size += len(n)
				}
				for _, v := range it.Update.ExpressionAttributeValues {
					size += valueSize(v)
				}
				r.sizes[key] = size
				r.writes = append(r.writes, write{kind: "group", key: key, tx: true})
			default:
				r.writes = append(r.writes, write{kind: "other", tx: true})
			}
		}
	}
}

// updateKind tells the store's transitions apart by what they write.
func updateKind(in *dynamodb.UpdateItemInput) string {
	names := map[string]bool{}
	for _, n := range in.ExpressionAttributeNames {
		names[n] = true
	}
	expr := aws.ToString(in.UpdateExpression)
	switch {
	case in.ReturnValues == types.ReturnValueAllNew:
		return "claim"
	case names["done_at"] && names["claimed_at"]:
		// The wake's settle of a row it sent unclaimed, kept as done.
		return "settle"
	case names["done_at"]:
		// A done that keeps the row (OUTFLOW_DONE_RETENTION): it removes
		// the due-index entry, as a delete does.
		return "done"
	case names["dead_queue"] && strings.Contains(expr, "SET") && names["errors"]:
		return "fail"
	case names["errors"] && names["due_at"]:
		return "retry"
	case names["claim_token"] && !names["errors"] && names["attempt"]:
		return "release"
	}
	return "other"
}

func keyOf(item map[string]types.AttributeValue) string {
	if s, ok := item["pk"].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// Count returns the requests made of one "Service.Operation".
func (r *Requests) Count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[op]
}

// Writes counts the recorded writes by kind: stage, claim, done, settle
// (the wake's done of a row it sent unclaimed) and the others.
func (r *Requests) Writes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, w := range r.writes {
		out[w.kind]++
	}
	return out
}

// Total returns the requests made of a service, optionally only writes.
func (r *Requests) Total(service string, writesOnly bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for op, c := range r.counts {
		name, ok := strings.CutPrefix(op, service+".")
		if !ok {
			continue
		}
		if writesOnly && !(name == "PutItem" || name == "UpdateItem" || name == "DeleteItem" || name == "BatchWriteItem" || name == "TransactWriteItems") {
			continue
		}
		n += c
	}
	return n
}

// claimBytes is what a claim adds to a staged item: its token, lease and
// timestamps, which the claim's, the done's and later writes carry.
const claimBytes = 120

// IndexWrites is what each transition costs in index writes (one write
// unit each, the projections being small): the table in
// docs/architecture.md, where a claim moves no index key.
var IndexWrites = map[string]int{"stage": 1, "group": 0, "claim": 0, "done": 1, "settle": 1, "retry": 2, "fail": 2, "release": 0, "other": 0}

// MovingClaimIndexWrites is the same for a design whose claim moves the
// row's due-index key (to its lease end): a delete and a put per claim.
var MovingClaimIndexWrites = map[string]int{"stage": 1, "group": 0, "claim": 2, "done": 1, "settle": 1, "retry": 2, "fail": 2, "release": 2, "other": 0}

// WCU is the write capacity the recorded writes consumed, by DynamoDB's
// rules: each table write costs ceil(item size / 1 KB) units (the item's
// staged size; updates here keep it under the next kilobyte), twice that
// inside a transaction (DynamoDB prepares and commits each item), plus the
// index writes each transition costs. An index write is one unit even for
// a transactional write: DynamoDB propagates a transaction's changes to
// global secondary indexes after it commits, as ordinary writes.
func (r *Requests) WCU(index map[string]int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0.0
	for _, w := range r.writes {
		size := r.sizes[w.key]
		if w.kind != "stage" && w.kind != "group" && w.kind != "settle" {
			size += claimBytes
		}
		units := math.Ceil(float64(max(size, 1)) / 1024)
		if w.tx {
			units *= 2
		}
		total += units + float64(index[w.kind])
	}
	return total
}

// ItemSize is an item's size as DynamoDB bills it: attribute names plus
// values (strings and binaries by length, numbers by about one byte per
// two digits plus one, containers three bytes plus their contents).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return (len(strings.TrimLeft(x.Value, "-0"))+1)/2 + 1
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range x.Value {
			n += len(e)
		}
		return n
	}
	return 1
}

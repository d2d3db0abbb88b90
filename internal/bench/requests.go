package bench

import (
	"context"
	"maps"
	"math"
	"regexp"
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
	// unindexed holds the keys last staged with no shard (lean rows): the
	// due index is sparse on shard, so such a row has no entry in it.
	unindexed map[string]bool
	writes    []write
}

type write struct {
	kind string // stage, group, claim, done, settle (unclaimed done), index, retry, fail, release, other
	key  string
	// tx marks a write made inside TransactWriteItems, which DynamoDB
	// bills twice (prepare and commit).
	tx bool
	// lean marks a stage with no shard: no due-index entry.
	lean bool
}

// NewRequests returns an empty counter.
func NewRequests() *Requests {
	return &Requests{counts: map[string]int{}, sizes: map[string]int{}, unindexed: map[string]bool{}}
}

// StagedBy takes from stage what the write-unit arithmetic needs of the
// rows it staged: each one's item size, and whether it is in the due
// index. A dispatcher's counter sees only its own writes; the rows' sizes
// and indexing were the staging counter's.
func (r *Requests) StagedBy(stage *Requests) {
	stage.mu.Lock()
	sizes, unindexed := maps.Clone(stage.sizes), maps.Clone(stage.unindexed)
	stage.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.sizes, sizes)
	maps.Copy(r.unindexed, unindexed)
}

// staged records a row's put: its size, and whether it has a shard.
func (r *Requests) staged(item map[string]types.AttributeValue, tx bool) {
	key := keyOf(item)
	_, indexed := item["shard"]
	r.sizes[key] = ItemSize(item)
	if indexed {
		delete(r.unindexed, key)
	} else {
		r.unindexed[key] = true
	}
	r.writes = append(r.writes, write{kind: "stage", key: key, tx: tx, lean: !indexed})
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
		r.staged(in.Item, false)
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
				r.staged(it.Put.Item, true)
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
	case setsOnly(in, "shard", "due_at") && names["shard"]:
		// A lean row put in the due index as it is (Store.Index, the
		// wake's hand-over, or the backstop's): its shard, and a due time
		// if it had none.
		return "index"
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

// setsOnly reports whether in's update expression only SETs attributes,
// every one of them among allowed (its condition may name others).
func setsOnly(in *dynamodb.UpdateItemInput, allowed ...string) bool {
	expr := aws.ToString(in.UpdateExpression)
	set, ok := strings.CutPrefix(strings.TrimSpace(expr), "SET ")
	if !ok || strings.Contains(set, "REMOVE") || strings.Contains(set, " ADD ") || strings.Contains(set, "DELETE") {
		return false
	}
	assigned := setTarget.FindAllStringSubmatch(set, -1)
	if len(assigned) == 0 {
		return false
	}
	for _, m := range assigned {
		name := m[1]
		if n, ok := in.ExpressionAttributeNames[name]; ok {
			name = n
		}
		if !slices.Contains(allowed, name) {
			return false
		}
	}
	return true
}

// setTarget is an assignment's target in a SET clause: "#3 = ", "a = ".
var setTarget = regexp.MustCompile(`(?:^|,)\s*(#?\w+)\s*=`)

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
var IndexWrites = map[string]int{"stage": 1, "group": 0, "claim": 0, "done": 1, "settle": 1, "index": 1, "retry": 2, "fail": 2, "release": 0, "other": 0}

// MovingClaimIndexWrites is the same for a design whose claim moves the
// row's due-index key (to its lease end): a delete and a put per claim.
var MovingClaimIndexWrites = map[string]int{"stage": 1, "group": 0, "claim": 2, "done": 1, "settle": 1, "index": 1, "retry": 2, "fail": 2, "release": 2, "other": 0}

// WCU is the write capacity the recorded writes consumed, by DynamoDB's
// rules: each table write costs ceil(item size / 1 KB) units (the item's
// staged size; updates here keep it under the next kilobyte), twice that
// inside a transaction (DynamoDB prepares and commits each item), plus the
// index writes each transition costs. An index write is one unit even for
// a transactional write: DynamoDB propagates a transaction's changes to
// global secondary indexes after it commits, as ordinary writes.
//
// index prices each transition of a row in the due index. A row out of
// it (a lean row, staged with no shard: the index is sparse on shard) has
// no entry to write or delete: its stage and its settle cost no index
// write, a retry or release only the entry's put, a dead-lettering only
// the dead index's put, until a write gives it a shard ("index", retry,
// release) and it is in the index as any other row.
func (r *Requests) WCU(index map[string]int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0.0
	// The keys out of the due index, as the writes so far leave them: at
	// first, those staged lean (here or by StagedBy's counter); a stage
	// here sets its key's state as it writes it.
	out := maps.Clone(r.unindexed)
	for _, w := range r.writes {
		size := r.sizes[w.key]
		if w.kind != "stage" && w.kind != "group" && w.kind != "settle" && w.kind != "index" {
			size += claimBytes
		}
		units := math.Ceil(float64(max(size, 1)) / 1024)
		if w.tx {
			units *= 2
		}
		total += units + float64(dueIndexWrites(w, out, index))
	}
	return total
}

// dueIndexWrites is the index writes w costs, by index for a row in the
// due index, and updates out, the keys out of it.
func dueIndexWrites(w write, out map[string]bool, index map[string]int) int {
	n := index[w.kind]
	switch w.kind {
	case "stage":
		out[w.key] = w.lean
		if w.lean {
			return 0
		}
	case "done", "settle":
		if out[w.key] {
			n = 0 // no entry to delete
		}
		out[w.key] = true
	case "fail":
		if out[w.key] {
			n = max(n-1, 0) // the dead index's put only
		}
		out[w.key] = true
	case "retry", "release":
		if out[w.key] {
			n = 1 // the entry's put: it gets its shard
		}
		out[w.key] = false
	case "index":
		out[w.key] = false
	case "claim":
		if out[w.key] {
			n = 0 // no entry to move
		}
	}
	return n
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

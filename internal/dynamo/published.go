package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The dispatcher's published configuration is one item of the outbox
// table, at ConfigKey, so that producers and the CLI check a row against
// what the dispatcher runs with, not against a copy. Table.Config
// describes it; docs/published-config.md documents it for producers in
// other languages.

// ConfigKey is the published configuration's key. Like the audit's item
// (AuditKey) and a group item's key it holds a space, which a row key
// never does (the producer refuses it, and StageInput refuses every
// reserved key, IsReservedKey), and it does not start with "group ".
const ConfigKey = "config dispatcher"

// ConfigFormat is the layout of the configuration item this code writes
// and reads; a reader refuses an item of a later format rather than
// misread it.
const ConfigFormat = 1

// ErrNotPublished is returned when the table holds no published
// configuration: no dispatcher function has run against it yet.
var ErrNotPublished = errors.New("no dispatcher configuration published")

// ItemGetter reads one item. *dynamodb.Client satisfies it.
type ItemGetter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// ConfigAPI reads and writes one item. *dynamodb.Client satisfies it.
type ConfigAPI interface {
	ItemGetter
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Published is the configuration the dispatcher runs with, as it
// publishes it: what a producer must agree with.
type Published struct {
	// Routes maps each route name to its target, as OUTFLOW_ROUTES.
	Routes map[string]string
	// Ordered maps each ordered route to its dead-head policy, block or
	// skip, as OUTFLOW_ORDERED.
	Ordered map[string]string
	// Shards is OUTFLOW_SHARDS.
	Shards int
	// MaxMessageBytes is OUTFLOW_MAX_MESSAGE_BYTES.
	MaxMessageBytes int
	// UnsureWait is the dispatcher's outbox.Policy.UnsureWait (from its
	// OUTFLOW_LEASE and OUTFLOW_BATCH_LINGER): how long a send that ended
	// unsure may still land, which a purge of its dead letter waits out.
	// Zero when the item predates it.
	UnsureWait time.Duration
	// Lean is the dispatcher's OUTFLOW_LEAN: producers may stage
	// unordered rows due at once with no due-index keys (AttrLean).
	Lean bool
	// Version is the dispatcher's release version (internal/version), ""
	// in an item published before 1.0.0. A new version is a change, so an
	// upgraded dispatcher publishes at its first invocation; producers
	// never compare it (Diff).
	Version string
	// Revision counts the writes of the item, from 1; PublishedAt and
	// PublishedBy say when and by which function the last one was. Publish
	// sets them, and Same and Diff ignore them.
	Revision    int64
	PublishedAt time.Time
	PublishedBy string
}

// RoutesString writes the routes as OUTFLOW_ROUTES does, sorted.
func (p Published) RoutesString() string {
	parts := make([]string, 0, len(p.Routes))
	for _, name := range slices.Sorted(maps.Keys(p.Routes)) {
		parts = append(parts, name+"="+p.Routes[name])
	}
	return strings.Join(parts, ",")
}

// OrderedString writes the ordered routes as OUTFLOW_ORDERED does,
// sorted: "none" when there are none.
func (p Published) OrderedString() string {
	if len(p.Ordered) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(p.Ordered))
	for _, name := range slices.Sorted(maps.Keys(p.Ordered)) {
		parts = append(parts, name+"="+p.Ordered[name])
	}
	return strings.Join(parts, ",")
}

// Same reports whether p and q publish the same configuration.
func (p Published) Same(q Published) bool {
	return len(p.Diff(q)) == 0 && ceilMs(p.UnsureWait) == ceilMs(q.UnsureWait) && p.Lean == q.Lean && p.Version == q.Version
}

// ceilMs is d in whole milliseconds, rounded up, as the item stores the
// unsure wait: a wait read back is never shorter than the one written,
// and an unchanged one compares the same after the round trip.
func ceilMs(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// Diff lists how q differs from p, one line each, sorted: a route only
// one of them has or that they send to different targets, an ordered
// route they disagree on, the shards and the message size limit. p is
// "published", q "here". The unsure wait is no setting a producer or a
// command gives, so it is not compared.
func (p Published) Diff(q Published) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(union(p.Routes, q.Routes))) {
		a, inP := p.Routes[name]
		b, inQ := q.Routes[name]
		switch {
		case !inQ:
			out = append(out, fmt.Sprintf("route %q: published (%s), missing here", name, a))
		case !inP:
			out = append(out, fmt.Sprintf("route %q: not published, given here (%s)", name, b))
		case a != b:
			out = append(out, fmt.Sprintf("route %q: published %s, here %s", name, a, b))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(union(p.Ordered, q.Ordered))) {
		if a, b := orNone(p.Ordered, name), orNone(q.Ordered, name); a != b {
			out = append(out, fmt.Sprintf("ordered route %q: published %s, here %s", name, a, b))
		}
	}
	if p.Shards != q.Shards {
		out = append(out, fmt.Sprintf("shards: published %d, here %d", p.Shards, q.Shards))
	}
	if p.MaxMessageBytes != q.MaxMessageBytes {
		out = append(out, fmt.Sprintf("max message bytes: published %d, here %d", p.MaxMessageBytes, q.MaxMessageBytes))
	}
	return out
}

func union(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

func orNone(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return "unordered"
}

// ReadPublished reads the table's published configuration with a
// strongly consistent read (a cold start's one read). None gives an error
// wrapping ErrNotPublished; an item this code cannot read, one that names
// the attribute; a failed read, a *TableError.
func ReadPublished(ctx context.Context, api ItemGetter, table string) (Published, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: keyOf(ConfigKey), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		// A table that does not exist reads as one, with the region and
		// the endpoint it was looked for in (TableError).
		return Published{}, NameTable(api, table, fmt.Errorf("read published configuration: %w", err))
	}
	if out.Item == nil {
		return Published{}, fmt.Errorf("table %s: %w (the sweep and wake functions publish it at their first invocation)", table, ErrNotPublished)
	}
	p, err := decodePublished(out.Item)
	if err != nil {
		return Published{}, fmt.Errorf("table %s: item %q: %w", table, ConfigKey, err)
	}
	return p, nil
}

// Publish writes p as the table's published configuration, only when it
// differs from what is there: a cold start with an unchanged
// configuration costs one read and no write. by names the publisher (the
// function). A write is conditional on the revision it read, so two
// publishers never lose a write silently: on a race it reads again and
// writes only if the other wrote something else. It reports whether it
// wrote.
func Publish(ctx context.Context, api ConfigAPI, table string, p Published, by string, now time.Time) (bool, error) {
	const tries = 3
	for range tries {
		cur, err := ReadPublished(ctx, api, table)
		found := err == nil
		if err != nil && !errors.Is(err, ErrNotPublished) {
			return false, err
		}
		if found && cur.Same(p) {
			return false, nil
		}
		p.Revision, p.PublishedAt, p.PublishedBy = cur.Revision+1, now, by
		in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: encodePublished(p),
			ExpressionAttributeNames: map[string]string{"#k": AttrKey}}
		if found {
			in.ConditionExpression = aws.String("#r = :r")
			in.ExpressionAttributeNames["#r"] = AttrRevision
			delete(in.ExpressionAttributeNames, "#k")
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":r": num(cur.Revision)}
		} else {
			in.ConditionExpression = aws.String("attribute_not_exists(#k)")
		}
		_, err = api.PutItem(ctx, in)
		var moved *types.ConditionalCheckFailedException
		if errors.As(err, &moved) {
			continue // another publisher wrote first: compare with theirs
		}
		if err != nil {
			return false, fmt.Errorf("table %s: publish configuration: %w", table, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("table %s: publish configuration: the item changed under each of %d tries", table, tries)
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func strMap(m map[string]string) types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = &types.AttributeValueMemberS{Value: v}
	}
	return &types.AttributeValueMemberM{Value: out}
}

// encodePublished is the item: the key, plain strings, numbers and maps
// of strings, and no attribute of a row's index keys, status or TTL, so no
// index, stream filter or TTL sweep ever sees it.
func encodePublished(p Published) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrKey:             &types.AttributeValueMemberS{Value: ConfigKey},
		AttrFormat:          num(ConfigFormat),
		AttrRoutes:          strMap(p.Routes),
		AttrOrdered:         strMap(p.Ordered),
		AttrShards:          num(int64(p.Shards)),
		AttrMaxMessageBytes: num(int64(p.MaxMessageBytes)),
		AttrRevision:        num(p.Revision),
		AttrPublishedAt:     num(p.PublishedAt.UnixMilli()),
	}
	if p.PublishedBy != "" {
		item[AttrPublishedBy] = &types.AttributeValueMemberS{Value: p.PublishedBy}
	}
	if p.Version != "" {
		item[AttrVersion] = &types.AttributeValueMemberS{Value: p.Version}
	}
	if p.UnsureWait > 0 {
		item[AttrUnsureWait] = num(ceilMs(p.UnsureWait))
	}
	if p.Lean {
		// Only when on, so a producer that predates it reads the item of
		// a stack that is not lean exactly as before.
		item[AttrLean] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return item
}

func decodePublished(item map[string]types.AttributeValue) (Published, error) {
	var p Published
	var errs []error
	getNum := func(name string) int64 {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: want a number", name))
			return 0
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: want a whole number, got %s", name, v.Value))
		}
		return n
	}
	getMap := func(name string) map[string]string {
		v, ok := item[name].(*types.AttributeValueMemberM)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: want a map of strings", name))
			return nil
		}
		out := make(map[string]string, len(v.Value))
		for k, e := range v.Value {
			s, ok := e.(*types.AttributeValueMemberS)
			if !ok {
				errs = append(errs, fmt.Errorf("%s.%s: want a string", name, k))
				continue
			}
			out[k] = s.Value
		}
		return out
	}
	if f := getNum(AttrFormat); len(errs) == 0 && f != ConfigFormat {
		return p, fmt.Errorf("%s %d: this outflow reads format %d; upgrade it", AttrFormat, f, ConfigFormat)
	}
	p.Routes, p.Ordered = getMap(AttrRoutes), getMap(AttrOrdered)
	p.Shards, p.MaxMessageBytes = int(getNum(AttrShards)), int(getNum(AttrMaxMessageBytes))
	p.Revision, p.PublishedAt = getNum(AttrRevision), time.UnixMilli(getNum(AttrPublishedAt))
	if by, ok := item[AttrPublishedBy].(*types.AttributeValueMemberS); ok {
		p.PublishedBy = by.Value
	}
	// Lenient too: it is for people, and no reader acts on it.
	if v, ok := item[AttrVersion].(*types.AttributeValueMemberS); ok {
		p.Version = v.Value
	}
	// Read leniently, as published_by: only a purge uses it, and it falls
	// back to the longest wait without it, so a bad value must not stop a
	// producer from loading the rest, nor a publisher from rewriting it.
	if ms, ok := wholeNumber(item, AttrUnsureWait); ok && ms > 0 && ms <= int64(math.MaxInt64/time.Millisecond) {
		p.UnsureWait = time.Duration(ms) * time.Millisecond
	}
	// Anything but true is off: a producer that cannot tell stages rows
	// in the due index, which every dispatcher delivers.
	if b, ok := item[AttrLean].(*types.AttributeValueMemberBOOL); ok {
		p.Lean = b.Value
	}
	return p, errors.Join(errs...)
}

// IsReservedKey reports whether key names an item that is not a row: the
// published configuration, the audit's or the backstop's item or an
// ordered group's item. No row may have it.
func IsReservedKey(key string) bool {
	return key == ConfigKey || key == AuditKey || key == BackstopKey || strings.HasPrefix(key, "group ")
}

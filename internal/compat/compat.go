// Package compat reads the forms earlier releases wrote, frozen under
// conformance/compat/vX.Y.Z: the outbox table's items (rows, ordered
// groups, the published configuration), the consumer's inbox and cursor
// items, the messages as a consumer's queue received them, and the
// template. Each directory was generated from its release's own code by
// this package's TestGenerate and is never edited; the tests beside it
// hold the current code to every directory, so a new one is covered with
// no code change. docs/compatibility.md says what is promised.
package compat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The files of a release's directory. Every one is read by a check
// (compat_test.go's TestCompat_EveryFixtureFileIsReadByACheck fails on a
// file none reads).
const (
	ReadmeFile    = "README.md"
	RowsFile      = "rows.json"
	GroupsFile    = "groups.json"
	PublishedFile = "published.json"
	InboxFile     = "inbox.json"
	MessagesFile  = "messages.json"
	TemplateFile  = "template.yaml"
)

// Files are the files every release's directory holds.
var Files = []string{ReadmeFile, RowsFile, GroupsFile, PublishedFile, InboxFile, MessagesFile, TemplateFile}

// Routes of the generated rows: one of each target kind. The stack test
// deploys targets under these names.
const (
	RouteQueue   = "orders"      // an SQS standard queue
	RouteFIFO    = "plain.fifo"  // an SQS FIFO queue, unordered
	RouteOrdered = "events.fifo" // an SQS FIFO queue, ordered (block)
	RouteTopic   = "notices"     // an SNS standard topic
	RouteBus     = "domain"      // an EventBridge bus, ?source=shop&detail-type=order.changed
	BusSource    = "shop"
	BusDetail    = "order.changed"
	// RouteSkip is an SQS FIFO queue, ordered (skip): a dead letter's
	// place is closed by a message of reason dead-letter.
	RouteSkip = "skipped.fifo"
	// RouteTopicOrdered is an SNS FIFO topic, ordered (block): a purged
	// dead head's place is closed by a message of reason purged.
	RouteTopicOrdered = "bulletins.fifo"
	// RouteTopicSkip is an SNS FIFO topic, ordered (skip).
	RouteTopicSkip = "skipped-bulletins.fifo"
)

// Ordered are the generated ordered routes and what a dead head does to
// their groups (block or skip), as OUTFLOW_ORDERED takes them.
var Ordered = map[string]string{RouteOrdered: "block", RouteSkip: "skip", RouteTopicOrdered: "block", RouteTopicSkip: "skip"}

// OrderedEnv is ordered as OUTFLOW_ORDERED: route=policy,… in name order.
func OrderedEnv(ordered map[string]string) string {
	var out []string
	for route, policy := range ordered {
		out = append(out, route+"="+policy)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Row states as the fixture captured them, and what the current code must
// make of a pending one (Expect).
const (
	StatePending = "pending"
	StateDone    = "done"
	StateDead    = "dead"

	// ExpectDelivered: the sweep sends the row and settles it done.
	ExpectDelivered = "delivered"
	// ExpectClosed: a purged dead letter that went back to pending; the
	// sweep sends the message that closes its place and settles it.
	ExpectClosed = "closed"
	// ExpectDeadLetter: the dispatcher refuses the row for good (it was
	// staged invalid on purpose) and dead-letters it.
	ExpectDeadLetter = "dead-letter"
)

// Item is one DynamoDB item in DynamoDB JSON: {"pk": {"S": "…"}, …}, B in
// base64.
type Item map[string]map[string]any

// Row is one outbox row item.
type Row struct {
	// Name says what the row is.
	Name string `json:"name"`
	// Route is its queue attribute: one of the Route constants.
	Route string `json:"route"`
	// State is the row's status when captured: pending, done or dead.
	State string `json:"state"`
	// Expect is what the sweep must make of a pending row (Expect*); ""
	// for one already settled.
	Expect string `json:"expect,omitempty"`
	Item   Item   `json:"item"`
}

// Rows is rows.json.
type Rows struct {
	Description string `json:"description"`
	Rows        []Row  `json:"rows"`
}

// Group is one ordered group's item, with its rows in place order.
type Group struct {
	Name  string `json:"name"`
	Route string `json:"route"`
	Group string `json:"group"`
	// Keys are the keys of the group's rows in rows.json, in place order:
	// the order its messages must reach the queue.
	Keys []string `json:"keys"`
	Item Item     `json:"item"`
}

// Groups is groups.json.
type Groups struct {
	Description string  `json:"description"`
	Groups      []Group `json:"groups"`
}

// Published is published.json: the dispatcher's published configuration
// item, and what it reads as.
type Published struct {
	Description string `json:"description"`
	Item        Item   `json:"item"`
	Expect      struct {
		Routes          map[string]string `json:"routes"`
		Ordered         map[string]string `json:"ordered"`
		Shards          int               `json:"shards"`
		MaxMessageBytes int               `json:"max_message_bytes"`
		Revision        int64             `json:"revision"`
		PublishedAtMs   int64             `json:"published_at_ms"`
		PublishedBy     string            `json:"published_by"`
		UnsureWaitMs    int64             `json:"unsure_wait_ms"`
		Lean            bool              `json:"lean"`
		// Version is the item's version attribute: "" before 1.0.0.
		Version string `json:"version"`
	} `json:"expect"`
}

// Step is one message given to an Inbox that continues from the items.
type Step struct {
	// Op is apply or close.
	Op string `json:"op"`
	// Message names a vector of messages.json.
	Message string `json:"message"`
	// Outcome is applied, closed or duplicate.
	Outcome string `json:"outcome"`
}

// Inbox is inbox.json: a consumer's inbox and cursor items, and what
// giving it more messages must do.
type Inbox struct {
	Description string `json:"description"`
	Consumer    string `json:"consumer"`
	Items       []Item `json:"items"`
	Steps       []Step `json:"steps"`
}

// Messages is messages.json, in conformance/consumer/decode.json's form,
// so every language's decode check reads it. Vectors are kept raw for
// the consume package's own vector type.
type Messages struct {
	Description string            `json:"description"`
	Vectors     []json.RawMessage `json:"vectors"`
}

// Root is the conformance/compat directory, found from the working
// directory or above it.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "conformance", "compat")
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no conformance/compat above %s", dir)
		}
		dir = up
	}
}

// Release is one earlier release's directory.
type Release struct {
	// Version is the directory's name, vX.Y.Z.
	Version string
	Dir     string
}

// Releases lists every release directory under conformance/compat, in
// name order.
func Releases() ([]Release, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []Release
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, Release{Version: e.Name(), Dir: filepath.Join(root, e.Name())})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no release under %s", root)
	}
	return out, nil
}

// Read decodes the release's file name into v, refusing unknown fields.
func (r Release) Read(name string, v any) error {
	b, err := os.ReadFile(filepath.Join(r.Dir, name))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s/%s: %w", r.Version, name, err)
	}
	return nil
}

// Path is the path of the release's file name.
func (r Release) Path(name string) string { return filepath.Join(r.Dir, name) }

// Write writes v as indented JSON to dir/name.
func Write(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
}

// ToJSON is item in DynamoDB JSON.
func ToJSON(item map[string]types.AttributeValue) Item {
	out := Item{}
	for k, v := range item {
		out[k] = avJSON(v)
	}
	return out
}

func avJSON(v types.AttributeValue) map[string]any {
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
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": sorted(v.Value)}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": sorted(v.Value)}
	case *types.AttributeValueMemberBS:
		var bs []string
		for _, b := range v.Value {
			bs = append(bs, base64.StdEncoding.EncodeToString(b))
		}
		return map[string]any{"BS": sorted(bs)}
	case *types.AttributeValueMemberM:
		m := map[string]any{}
		for k, e := range v.Value {
			m[k] = avJSON(e)
		}
		return map[string]any{"M": m}
	case *types.AttributeValueMemberL:
		l := []any{}
		for _, e := range v.Value {
			l = append(l, avJSON(e))
		}
		return map[string]any{"L": l}
	}
	panic(fmt.Sprintf("compat: attribute value %T", v))
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// Key is the item's pk.
func (it Item) Key() string {
	s, _ := it["pk"]["S"].(string)
	return s
}

// AttributeValues is the item as the SDK takes it.
func (it Item) AttributeValues() (map[string]types.AttributeValue, error) {
	out := map[string]types.AttributeValue{}
	for k, v := range it {
		av, err := fromJSON(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func fromJSON(v map[string]any) (types.AttributeValue, error) {
	if len(v) != 1 {
		return nil, fmt.Errorf("%v: not one type", v)
	}
	for typ, raw := range v {
		switch typ {
		case "S":
			s, ok := raw.(string)
			if ok {
				return &types.AttributeValueMemberS{Value: s}, nil
			}
		case "N":
			s, ok := raw.(string)
			if ok {
				return &types.AttributeValueMemberN{Value: s}, nil
			}
		case "B":
			s, ok := raw.(string)
			if ok {
				b, err := base64.StdEncoding.DecodeString(s)
				return &types.AttributeValueMemberB{Value: b}, err
			}
		case "BOOL":
			b, ok := raw.(bool)
			if ok {
				return &types.AttributeValueMemberBOOL{Value: b}, nil
			}
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: true}, nil
		case "SS", "NS", "BS":
			list, ok := raw.([]any)
			if !ok {
				break
			}
			var ss []string
			for _, e := range list {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("%s member %v", typ, e)
				}
				ss = append(ss, s)
			}
			switch typ {
			case "SS":
				return &types.AttributeValueMemberSS{Value: ss}, nil
			case "NS":
				return &types.AttributeValueMemberNS{Value: ss}, nil
			}
			var bs [][]byte
			for _, s := range ss {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, err
				}
				bs = append(bs, b)
			}
			return &types.AttributeValueMemberBS{Value: bs}, nil
		case "M":
			m, ok := raw.(map[string]any)
			if !ok {
				break
			}
			out := map[string]types.AttributeValue{}
			for k, e := range m {
				em, ok := e.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("member %s: %v", k, e)
				}
				av, err := fromJSON(em)
				if err != nil {
					return nil, fmt.Errorf("member %s: %w", k, err)
				}
				out[k] = av
			}
			return &types.AttributeValueMemberM{Value: out}, nil
		case "L":
			list, ok := raw.([]any)
			if !ok {
				break
			}
			out := []types.AttributeValue{}
			for i, e := range list {
				em, ok := e.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("element %d: %v", i, e)
				}
				av, err := fromJSON(em)
				if err != nil {
					return nil, fmt.Errorf("element %d: %w", i, err)
				}
				out = append(out, av)
			}
			return &types.AttributeValueMemberL{Value: out}, nil
		}
		return nil, fmt.Errorf("%s: %v is not of that type", typ, raw)
	}
	return nil, nil
}

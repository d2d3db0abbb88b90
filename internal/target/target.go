package target

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Kind is the kind of destination a route delivers to.
type Kind int

// The kinds of destination. A route's target string says which it is: an
// SQS queue URL, an SNS topic ARN, or an EventBridge bus ARN or name.
const (
	KindSQS Kind = iota
	KindSNS
	KindEventBridge
)

// String names the kind as AWS does.
func (k Kind) String() string {
	switch k {
	case KindSQS:
		return "SQS"
	case KindSNS:
		return "SNS"
	case KindEventBridge:
		return "EventBridge"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Target is where a route delivers, read from its target string.
type Target struct {
	Kind Kind
	// Address is the queue URL, the topic ARN, or the bus name or ARN, as
	// the API call names it.
	Address string
	// FIFO is set for a FIFO queue or topic: rows need a message group.
	FIFO bool
	// Source and DetailType are an EventBridge route's defaults for the
	// event's source and detail-type, for rows without the attributes.
	Source, DetailType string
}

// EventBridge route options, written after the bus as a query string:
// arn:aws:events:REGION:ACCOUNT:event-bus/NAME?source=S&detail-type=D.
const (
	OptionSource     = "source"
	OptionDetailType = "detail-type"
)

var (
	// topicARN is an SNS topic ARN: the name holds letters, digits,
	// hyphens and underscores, and ".fifo" at the end of a FIFO topic.
	topicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]+(\.fifo)?$`)
	// busARN is an EventBridge bus ARN; busName a bus name.
	busARN  = regexp.MustCompile(`^arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus/([A-Za-z0-9._/-]{1,256})$`)
	busName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,256}$`)
	// queueName is an SQS queue name, the last segment of its URL.
	queueName = regexp.MustCompile(`^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`)
)

// ParseTarget reads a route's target: an absolute SQS queue URL, an SNS
// topic ARN, or an EventBridge bus ARN or plain name, the last two with
// optional "?source=S&detail-type=D". A bus given by name needs at least
// one option and holds no slash, so that a queue or topic written by its
// name, or a queue URL missing its scheme, is refused rather than taken
// for a bus (a partner bus, whose name has one, is named by its ARN).
func ParseTarget(s string) (Target, error) {
	address, options, hasOptions := strings.Cut(s, "?")
	var t Target
	byName := false
	switch {
	case strings.HasPrefix(address, "arn:") && strings.Contains(address, ":sns:"):
		if !topicARN.MatchString(address) || len(address[strings.LastIndex(address, ":")+1:]) > 256 {
			return Target{}, fmt.Errorf("%q is not an SNS topic ARN", address)
		}
		t = Target{Kind: KindSNS, Address: address, FIFO: strings.HasSuffix(address, ".fifo")}
	case strings.HasPrefix(address, "arn:") && strings.Contains(address, ":events:"):
		if !busARN.MatchString(address) {
			return Target{}, fmt.Errorf("%q is not an EventBridge event bus ARN", address)
		}
		t = Target{Kind: KindEventBridge, Address: address}
	case strings.Contains(address, "://"):
		u, err := url.Parse(address)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || strings.Contains(address, "#") {
			return Target{}, fmt.Errorf("%q is not a queue URL (http or https, no credentials or fragment, ending in the queue's name)", address)
		}
		name := u.Path[strings.LastIndex(u.Path, "/")+1:]
		if !queueName.MatchString(name) {
			return Target{}, fmt.Errorf("%q is not a queue URL (http or https, no credentials or fragment, ending in the queue's name)", address)
		}
		t = Target{Kind: KindSQS, Address: address, FIFO: strings.HasSuffix(name, ".fifo")}
	case busName.MatchString(address):
		t, byName = Target{Kind: KindEventBridge, Address: address}, true
	default:
		return Target{}, fmt.Errorf("%q is not a queue URL, a topic ARN or an event bus ARN or name", address)
	}
	if hasOptions && t.Kind != KindEventBridge {
		return Target{}, fmt.Errorf("%q: only EventBridge routes take options", s)
	}
	if err := t.readOptions(options); err != nil {
		return Target{}, fmt.Errorf("%q: %w", s, err)
	}
	if byName && t.Source == "" && t.DetailType == "" {
		return Target{}, fmt.Errorf("%q: a bus given by name needs its options (%s?%s=S&%s=D) or its ARN, so a queue or topic named where its URL or ARN belongs is not taken for a bus", s, address, OptionSource, OptionDetailType)
	}
	return t, nil
}

// readOptions reads an EventBridge route's options, name=value pairs
// joined by "&". Values are percent-decoded as in a URL path, so a "+"
// stays a "+" (a source may hold one; write a space as %20).
func (t *Target) readOptions(options string) error {
	seen := map[string]bool{}
	for _, opt := range strings.Split(options, "&") {
		if opt == "" {
			continue
		}
		name, raw, _ := strings.Cut(opt, "=")
		v, err := url.PathUnescape(raw)
		if err != nil {
			return fmt.Errorf("option %s: %w", name, err)
		}
		if v == "" || seen[name] {
			return fmt.Errorf("option %s wants one non-empty value", name)
		}
		seen[name] = true
		switch name {
		case OptionSource:
			t.Source = v
		case OptionDetailType:
			t.DetailType = v
		default:
			return fmt.Errorf("unknown option %q (want %s or %s)", name, OptionSource, OptionDetailType)
		}
	}
	for _, err := range []error{checkSource(t.Source), checkDetailType(t.DetailType)} {
		if err != nil {
			return err
		}
	}
	return nil
}

package faults

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/outflowhq/outflow/internal/delivery"
)

// EventBridge wraps the EventBridge API under the deliverer with the same
// send faults as SQS, on PutEvents: the whole call fails, an entry fails
// (InternalFailure, transient; or InvalidArgument, the event's own fault),
// or an entry is put but reported failed.
type EventBridge struct {
	Next delivery.EventBridgeAPI
	Plan *Plan
}

var _ delivery.EventBridgeAPI = EventBridge{}

// PutEvents implements delivery.EventBridgeAPI. Decisions hash the entry's
// key and attempt, which the deliverer puts in every event's detail.
// PutEvents answers entry by entry in the order asked, so the answer keeps
// that order: the injected answers in their places, the service's in the
// places of the entries it was given.
func (s EventBridge) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if len(in.Entries) > 0 {
		key, attempt := EventSite(in.Entries[0])
		if s.Plan.Hit(SendCall, key, attempt) {
			return nil, injected(SendCall)
		}
	}
	answers := make([]types.PutEventsResultEntry, len(in.Entries))
	pass := make([]types.PutEventsRequestEntry, 0, len(in.Entries))
	var passAt []int // index in in.Entries of each entry passed on
	for i, e := range in.Entries {
		if kind, hit := s.Plan.entryFault(EventSite(e)); hit {
			answers[i] = eventRefused(kind, kind == SendSender)
			continue
		}
		pass, passAt = append(pass, e), append(passAt, i)
	}
	if len(pass) > 0 {
		next := *in
		next.Entries = pass
		res, err := s.Next.PutEvents(ctx, &next, opts...)
		if err != nil {
			return nil, err
		}
		for j, r := range res.Entries {
			if j >= len(passAt) {
				break
			}
			i := passAt[j]
			answers[i] = r
			if r.ErrorCode != nil {
				continue
			}
			if key, attempt := EventSite(in.Entries[i]); s.Plan.Hit(SendAmbiguous, key, attempt) {
				s.Plan.MarkDuplicateWindow(key)
				answers[i] = eventRefused(SendAmbiguous, false)
			}
		}
	}
	out := &eventbridge.PutEventsOutput{Entries: answers}
	for _, a := range answers {
		if a.ErrorCode != nil {
			out.FailedEntryCount++
		}
	}
	return out, nil
}

// EventSite is the row key and attempt an event carries in its detail's
// outflow member. An event whose detail does not read gives empty ones.
func EventSite(e types.PutEventsRequestEntry) (key, attempt string) {
	var d struct {
		Outflow struct {
			Key     string `json:"key"`
			Attempt int    `json:"attempt"`
		} `json:"outflow"`
	}
	if json.Unmarshal([]byte(aws.ToString(e.Detail)), &d) != nil {
		return "", ""
	}
	return d.Outflow.Key, strconv.Itoa(d.Outflow.Attempt)
}

func eventRefused(kind Kind, eventsFault bool) types.PutEventsResultEntry {
	code := "InternalFailure"
	if eventsFault {
		code = "InvalidArgument"
	}
	return types.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String(injected(kind).Error())}
}

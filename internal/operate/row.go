package operate

import (
	"context"
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// AttemptError is one failed attempt of a row's error history.
type AttemptError struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	Message string    `json:"message"`
	// Unsure says the attempt's outcome is unknown (outbox.AttemptError).
	Unsure bool `json:"unsure"`
	// Redriven marks the first attempt recorded after a redrive, whose
	// fresh budget counts from 1 again: its attempt is not above the one
	// before it.
	Redriven bool `json:"redriven,omitempty"`
}

// Row is one row as an operator sees it: its state, group and place,
// error history, and the payload only when asked for.
type Row struct {
	Key    string        `json:"key"`
	Queue  string        `json:"queue"`
	Status outbox.Status `json:"status"`
	// Outcome names how the row ended, or where it stands (OutcomeOf):
	// status alone cannot tell, since a purged row's closing message
	// settles it done. OutcomeDetail says it in a sentence.
	Outcome       string `json:"outcome"`
	OutcomeDetail string `json:"outcome_detail"`
	// Closed is the row's closed as stored (outbox.Row.Closed).
	Closed      string            `json:"closed,omitempty"`
	Attempts    int               `json:"attempts"`
	Group       string            `json:"group,omitempty"`
	Seq         int64             `json:"seq,omitempty"`
	Prev        string            `json:"prev,omitempty"`
	BlocksGroup bool              `json:"blocks_group"`
	Attributes  map[string]string `json:"attributes,omitempty"`
	CreatedAt   time.Time         `json:"created_at,omitzero"`
	DueAt       time.Time         `json:"due_at,omitzero"`
	LeaseUntil  time.Time         `json:"lease_until,omitzero"`
	FailedAt    time.Time         `json:"failed_at,omitzero"`
	RedrivenAt  time.Time         `json:"redriven_at,omitzero"`
	// MayHaveClosed says, of a dead letter, that the message closing its place may have
	// reached the consumer (closed unsure or purge-unsure), or the row was
	// redriven as late before (place_maybe_closed): a redrive needs
	// --late, as the row could arrive after its place was closed.
	MayHaveClosed bool           `json:"may_have_closed,omitempty"`
	LastError     string         `json:"last_error,omitempty"`
	Errors        []AttemptError `json:"errors"`
	PayloadBytes  int            `json:"payload_bytes"`
	// PayloadDropped says the row was delivered and kept as a tombstone,
	// which holds a digest of its payload and attributes, not them
	// (issue 50: no personal data held after delivery).
	PayloadDropped bool    `json:"payload_dropped,omitempty"`
	Payload        *string `json:"payload,omitempty"`
	// Encoding is "base64" for a payload that is not UTF-8 text, else
	// empty: the payload as text.
	Encoding  string `json:"payload_encoding,omitempty"`
	Malformed string `json:"malformed,omitempty"`
}

// Show reads the row with key: nil and no error when there is none. A
// row that cannot be read whole is shown with what could be read and why
// (Malformed). The payload is included only when payload is true.
func Show(ctx context.Context, op *dynamo.Operator, key string, payload bool, ordered map[string]outbox.DeadHead) (*Row, error) {
	row, derr := op.Get(ctx, key)
	if row == nil {
		return nil, derr
	}
	s := &Row{
		Key: row.Key, Queue: row.Queue, Status: row.Status, Attempts: row.Attempt, Group: row.Group, Seq: row.Seq, Prev: row.Prev,
		BlocksGroup:   row.Status == outbox.StatusFailed && outbox.DeadLetterBlocks(ordered, outbox.Link{Queue: row.Queue, Seq: row.Seq, Closed: row.Closed}),
		MayHaveClosed: row.Status == outbox.StatusFailed && (outbox.MayHaveClosed(row.Closed) || !row.PlaceMaybeClosed.IsZero()),
		Attributes:    row.Attributes, CreatedAt: row.CreatedAt, DueAt: row.DueAt, LeaseUntil: row.LeaseUntil, FailedAt: row.FailedAt,
		RedrivenAt: row.RedrivenAt, LastError: CodeFirst(row.LastError), Errors: make([]AttemptError, len(row.Errors)), PayloadBytes: len(row.Payload),
	}
	o := OutcomeOf(row.Status, row.Closed, row.Attempt, !row.RedrivenAt.IsZero(), !row.UnsureAt.IsZero())
	s.Outcome, s.OutcomeDetail, s.Closed = o.Name, o.Detail, row.Closed
	for i, e := range row.Errors {
		s.Errors[i] = AttemptError{At: e.At, Attempt: e.Attempt, Message: CodeFirst(e.Message), Unsure: e.Unsure,
			Redriven: i > 0 && e.Attempt <= row.Errors[i-1].Attempt}
	}
	if derr != nil {
		s.Malformed = derr.Error()
	}
	s.PayloadDropped = row.ContentDigest != "" && len(row.Payload) == 0
	if payload && !s.PayloadDropped {
		text, enc := string(row.Payload), ""
		if !utf8.Valid(row.Payload) {
			text, enc = base64.StdEncoding.EncodeToString(row.Payload), "base64"
		}
		s.Payload, s.Encoding = &text, enc
	}
	return s, nil
}

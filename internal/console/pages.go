package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
)

// pageSize is how many dead letters a page of the list shows.
const pageSize = 50

// overviewData is the overview page.
type overviewData struct {
	Report     operate.Report
	Exact      bool
	Shards     []named
	Queues     []named
	Charts     Charts
	ChartsNote string
	At         time.Time
	// Backstop is what the sweep's lean backstop found, from its item (as
	// the audit's counts are); nil when it never ran.
	Backstop *dynamo.BackstopCounts
}

// named is one count of a table, in order.
type named struct {
	Name   string
	Counts *dynamo.Counts
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ordered, err := s.cfg.Ordered(r.Context())
	if err != nil {
		s.fail(w, r, "read the ordered routes", err)
		return
	}
	now := s.cfg.Now()
	exact := r.URL.Query().Get("exact") == "1"
	rep, err := operate.Stats(r.Context(), s.cfg.Operator, now, operate.StatsQuery{
		Exact: exact, Blocked: true, DeadQueues: s.cfg.DeadQueues, Cap: s.cfg.Cap,
	}, ordered)
	if err != nil {
		s.fail(w, r, "count the backlog", err)
		return
	}
	found, err := s.cfg.Operator.Backstopped(r.Context())
	if err != nil {
		s.fail(w, r, "read what the backstop found", err)
		return
	}
	d := overviewData{Report: rep, Exact: exact, Shards: sortedCounts(rep.Shards, true), Queues: sortedCounts(rep.Queues, false), At: now}
	if found != (dynamo.BackstopCounts{}) {
		d.Backstop = &found
	}
	d.Charts, d.ChartsNote = s.charts.get(r.Context(), s.cfg.Metrics, s.cfg.Operator.Table(), now)
	s.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// deadData is the dead-letter list with its filters.
type deadData struct {
	Filter deadFilter
	Page   operate.Page
	// Queues are the routes to filter by.
	Queues []string
	Next   string
	Error  string
}

// deadFilter is the list's query string.
type deadFilter struct {
	Queue, Group, Within, Older string
	Before                      int64
}

func (f deadFilter) query(before time.Time) string {
	v := url.Values{}
	for k, s := range map[string]string{"queue": f.Queue, "group": f.Group, "within": f.Within, "older": f.Older} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !before.IsZero() {
		v.Set("before", strconv.FormatInt(before.UnixMilli(), 10))
	}
	return v.Encode()
}

func (s *Server) deadList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := deadFilter{Queue: strings.TrimSpace(q.Get("queue")), Group: strings.TrimSpace(q.Get("group")),
		Within: strings.TrimSpace(q.Get("within")), Older: strings.TrimSpace(q.Get("older"))}
	d := deadData{Filter: f, Queues: s.cfg.DeadQueues}
	now := s.cfg.Now()
	dq := dynamo.DeadQuery{Queue: f.Queue}
	if f.Within != "" {
		within, err := time.ParseDuration(f.Within)
		if err != nil || within <= 0 {
			d.Error = "failed within: a duration such as 90m or 24h"
			s.render(w, r, http.StatusBadRequest, "dead", "Dead letters", d)
			return
		}
		dq.Since = now.Add(-within)
	}
	if f.Older != "" {
		older, err := time.ParseDuration(f.Older)
		if err != nil || older < 0 {
			d.Error = "failed more than: a duration such as 1h or 168h"
			s.render(w, r, http.StatusBadRequest, "dead", "Dead letters", d)
			return
		}
		dq.Before = now.Add(-older)
	}
	if b, err := strconv.ParseInt(q.Get("before"), 10, 64); err == nil && b > 0 {
		if before := time.UnixMilli(b); dq.Before.IsZero() || before.Before(dq.Before) {
			dq.Before = before
		}
	}
	ordered, err := s.cfg.Ordered(r.Context())
	if err != nil {
		s.fail(w, r, "read the ordered routes", err)
		return
	}
	var keep func(operate.DeadLetter) bool
	if f.Group != "" {
		keep = func(d operate.DeadLetter) bool { return d.Group == f.Group }
	}
	d.Page, err = operate.ListPage(r.Context(), s.cfg.Operator, dq, pageSize, ordered, keep)
	if err != nil {
		s.fail(w, r, "list dead letters", err)
		return
	}
	if !d.Page.Next.IsZero() {
		d.Next = "/dead?" + f.query(d.Page.Next)
	}
	s.render(w, r, http.StatusOK, "dead", "Dead letters", d)
}

// rowData is one row, or the lookup form alone.
type rowData struct {
	Key     string
	Row     *operate.Row
	Missing bool
	Payload bool
}

func (s *Server) row(w http.ResponseWriter, r *http.Request) {
	// The key is taken as given: see targetOf.
	d := rowData{Key: r.URL.Query().Get("key"), Payload: r.URL.Query().Get("payload") == "1"}
	if d.Key == "" {
		s.render(w, r, http.StatusOK, "row", "Row lookup", d)
		return
	}
	ordered, err := s.cfg.Ordered(r.Context())
	if err != nil {
		s.fail(w, r, "read the ordered routes", err)
		return
	}
	if d.Row, err = operate.Show(r.Context(), s.cfg.Operator, d.Key, d.Payload, ordered); err != nil {
		s.fail(w, r, "read the row", err)
		return
	}
	status := http.StatusOK
	if d.Row == nil {
		d.Missing, status = true, http.StatusNotFound
	}
	s.render(w, r, status, "row", "Row "+d.Key, d)
}

// blockedGroup is a blocked ordered group: its dead head, and how many
// rows were staged behind it.
type blockedGroup struct {
	Head    dynamo.DeadRef
	Waiting int64
	Error   string
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	ordered, err := s.cfg.Ordered(r.Context())
	if err != nil {
		s.fail(w, r, "read the ordered routes", err)
		return
	}
	heads, err := s.cfg.Operator.BlockedGroups(r.Context(), operate.Blocks(ordered))
	if err != nil {
		s.fail(w, r, "read the blocked groups", err)
		return
	}
	groups := make([]blockedGroup, len(heads))
	for i, h := range heads {
		h.LastError = operate.CodeFirst(h.LastError)
		groups[i].Head = h
		// The group item's tail is the last row staged in the group: every
		// row after the head waits for it.
		tail, err := s.cfg.Operator.GroupTail(r.Context(), h.Queue, h.Group)
		if err != nil {
			groups[i].Error = err.Error()
			continue
		}
		groups[i].Waiting = max(0, tail.Seq-h.Seq)
	}
	s.render(w, r, http.StatusOK, "groups", "Blocked ordered groups", groups)
}

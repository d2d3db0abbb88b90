package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/operate"
)

// maxKeys bounds the keys one POST names.
const maxKeys = 1000

// target is what an action takes: keys, or every dead letter of a route
// (Queue) that failed before At.
type target struct {
	Keys  []string
	Queue string
	// Late is a redrive that moves too the dead letters whose place's
	// closing message may have reached the consumer (outflow dead
	// redrive --late).
	Late bool
	// At is when the action was asked for: a route's dead letters are
	// those dead at At, the moment the confirmation counted them, so
	// that a purge never takes more than it named.
	At time.Time
	// Count is how many dead letters a route's purge would take,
	// as counted for the confirmation.
	Count int
}

// AtMs is At in Unix milliseconds, for the confirmation form.
func (t target) AtMs() int64 { return t.At.UnixMilli() }

// targetOf reads the form: keys (repeated), or queue.
func (s *Server) targetOf(r *http.Request) (target, string) {
	var t target
	// Keys are taken as given: a key may begin or end with a space, and
	// trimmed it would name another row.
	for _, k := range r.PostForm["key"] {
		if k != "" {
			t.Keys = append(t.Keys, k)
		}
	}
	t.Queue = strings.TrimSpace(r.PostFormValue("queue"))
	t.Late = r.PostFormValue("late") == "yes"
	t.At = s.cfg.Now()
	if ms, err := strconv.ParseInt(r.PostFormValue("at"), 10, 64); err == nil && ms > 0 && time.UnixMilli(ms).Before(t.At) {
		t.At = time.UnixMilli(ms)
	}
	switch {
	case (len(t.Keys) > 0) == (t.Queue != ""):
		return t, "Select dead letters, or name a route: one or the other."
	case len(t.Keys) > maxKeys:
		return t, "Too many keys in one request: at most " + strconv.Itoa(maxKeys) + "."
	}
	return t, ""
}

// resultData is what an action did.
type resultData struct {
	Target target
	Result operate.Result
	Error  string
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	t, bad := s.targetOf(r)
	if bad != "" {
		s.refuse(w, r, http.StatusBadRequest, bad)
		return
	}
	redrive := operate.Redrive
	if t.Late {
		redrive = operate.RedriveLate
	}
	res, err := redrive(r.Context(), s.cfg.Operator, t.Keys, operate.Selection{Queue: t.Queue}, t.At, nil)
	s.done(w, r, t, res, err)
}

// purge asks for a confirmation that names what will go, then, posted
// again with confirm=yes, purges exactly that.
func (s *Server) purge(w http.ResponseWriter, r *http.Request) {
	t, bad := s.targetOf(r)
	if bad != "" {
		s.refuse(w, r, http.StatusBadRequest, bad)
		return
	}
	sel := operate.Selection{Queue: t.Queue}
	if r.PostFormValue("confirm") != "yes" {
		if len(t.Keys) == 0 {
			err := operate.EachKey(r.Context(), s.cfg.Operator, nil, sel, t.At, func(string) error {
				t.Count++
				return nil
			})
			if err != nil {
				s.fail(w, r, "count the dead letters", err)
				return
			}
		}
		s.render(w, r, http.StatusOK, "confirm", "Confirm purge", t)
		return
	}
	var published time.Duration
	if s.cfg.UnsureWait != nil {
		var err error
		if published, err = s.cfg.UnsureWait(r.Context()); err != nil {
			s.fail(w, r, "read the dispatcher's unsure wait", err)
			return
		}
	}
	// The rows are those dead when the confirmation was shown (t.At); the
	// wait counts to the press, however late.
	hold := operate.Hold{Now: s.cfg.Now(), Wait: operate.HoldWait(published)}
	res, err := operate.Purge(r.Context(), s.cfg.Operator, t.Keys, sel, t.At, hold, nil)
	s.done(w, r, t, res, err)
}

func (s *Server) done(w http.ResponseWriter, r *http.Request, t target, res operate.Result, err error) {
	d := resultData{Target: t, Result: res}
	status := http.StatusOK
	if err != nil {
		s.cfg.Log.ErrorContext(r.Context(), "console: "+res.Action, "error", err, "done", res.Done, "skipped", res.Skipped)
		d.Error, status = err.Error(), http.StatusBadGateway
	}
	s.render(w, r, status, "result", strings.ToUpper(res.Action[:1])+res.Action[1:], d)
}

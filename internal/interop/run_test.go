package interop_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// run is the test's view of the processes: what each said so far, and
// the consumers' kills. Only the test's goroutine touches it.
type run struct {
	t      *testing.T
	events <-chan event
	rng    *rand.Rand
	start  time.Time
	// goDone and opDone report the Go producer's and the operator's end.
	goDone <-chan goReport
	opDone <-chan opReport
	// startConsumer starts a consumer in lang, its life-th process.
	startConsumer func(lang string, life int) *proc
	// plan is the rows refused for good: none is ever to be applied.
	plan deadPlan

	// lang and isPro name each process's language and whether it
	// produces; producers are the producer processes by language,
	// consumers each language's current consumer process; all every
	// process started.
	lang      map[*proc]string
	isPro     map[*proc]bool
	producers map[string]*proc
	consumers map[string]*proc
	all       []*proc
	// readyProducers counts the producers ready.
	readyProducers int
	// life is what the test knows of each consumer process: whether it is
	// ready, the outcomes it said, and when it is to be killed.
	life map[*proc]*life
	// chaos is set while consumers are to be killed; kills counts each
	// language's; stopping, once the consumers are told to stop.
	chaos    bool
	kills    map[string]int
	stopping bool

	// staged holds each producer's rows by language, races its lost
	// races; said what the consumers said of each key, in order; outcomes
	// each language's outcomes over all its processes; done each
	// language's last consumer's last words; operated the operator's
	// report.
	staged   map[string][]stagedRow
	races    map[string]int
	said     map[string][]said
	outcomes map[string]map[string]int
	done     map[string]line
	operated *opReport

	// moved is set when something happened that moves the run on, which
	// restarts wait's idle timer; status, the last state a wait's cond
	// read, for its failure's message.
	moved  bool
	status string
}

// life is one consumer process's.
type life struct {
	// ready, killed, done (said done) and ended (its end taken in).
	ready, killed, done, ended bool
	// results counts the outcomes it said; after killAfter of them, or at
	// killAt, whichever comes first, it is killed (while chaos lasts).
	results, killAfter int
	killAt             time.Time
}

// said is an outcome a consumer reported for a message.
type said struct {
	by, outcome, group, closed, err string
	seq                             int64
	redriven                        bool
}

func newRun(t *testing.T, evs <-chan event, rng *rand.Rand, start time.Time, plan deadPlan) *run {
	return &run{t: t, events: evs, rng: rng, start: start, plan: plan, lang: map[*proc]string{}, isPro: map[*proc]bool{}, producers: map[string]*proc{},
		consumers: map[string]*proc{}, life: map[*proc]*life{}, kills: map[string]int{}, staged: map[string][]stagedRow{},
		races: map[string]int{}, said: map[string][]said{}, outcomes: map[string]map[string]int{}, done: map[string]line{}}
}

// producer takes in a producer process.
func (r *run) producer(lang string, p *proc) {
	r.lang[p], r.isPro[p], r.producers[lang] = lang, true, p
	r.all = append(r.all, p)
}

// consumer starts lang's consumer, again if it ran before.
func (r *run) consumer(lang string) {
	lives := 1
	for p := range r.life {
		if r.lang[p] == lang {
			lives++
		}
	}
	p := r.startConsumer(lang, lives)
	r.lang[p], r.consumers[lang], r.life[p] = lang, p, &life{}
	r.all = append(r.all, p)
	if r.stopping {
		p.close() // started after the others were told to stop: it stops too
	}
}

// allReady reports whether every producer and current consumer is ready.
func (r *run) allReady() bool {
	n := 0
	for _, p := range r.consumers {
		if r.life[p].ready {
			n++
		}
	}
	return n == len(r.consumers) && r.readyProducers == len(r.producers)
}

// killedEnough reports whether each consumer was killed kills times.
func (r *run) killedEnough() bool {
	for _, lang := range langs {
		if r.kills[lang] < kills {
			return false
		}
	}
	return true
}

// waitFor is wait with cond checked after each event.
func (r *run) waitFor(what string, cond func() bool) {
	r.t.Helper()
	r.wait(what, 0, cond)
}

// wait handles what the processes say until cond holds, checking it
// after each event or, with every above zero, that often instead (a cond
// that reads a table), and kills consumers while chaos lasts. It fails
// the test, with the processes' stderr, when a process ends before it
// said all it should or says what it should not, or when nothing moves
// the run on for idle: a process ready, staging, stopping or ending, an
// outcome that is not a retry (applied, closed, late), the Go producer
// or the operator done, or a change in the status cond read. Retries
// alone (a message failed, skipped, a gap, a duplicate) are no progress:
// a message cycling for ever ends the wait.
func (r *run) wait(what string, every time.Duration, cond func() bool) {
	r.t.Helper()
	timer := time.NewTimer(idle)
	defer timer.Stop()
	tick := time.NewTicker(100 * time.Millisecond) // kills are due between events too
	defer tick.Stop()
	var check <-chan time.Time
	if every > 0 {
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		check = ticker.C
	}
	for {
		if r.moved {
			timer.Reset(idle)
			r.moved = false
		}
		if cond() {
			return
		}
		if r.moved {
			timer.Reset(idle)
			r.moved = false
		}
		for ready := false; !ready; {
			select {
			case ev := <-r.events:
				r.handle(what, ev)
				ready = every == 0
			case rep := <-r.goDone:
				if rep.err != nil {
					r.fail("waiting for %s: the Go producer failed: %v", what, rep.err)
				}
				r.staged[langGo], r.races[langGo] = rep.staged, rep.races
				r.t.Logf("%6.1fs the go producer has staged its rows", time.Since(r.start).Seconds())
				r.moved, ready = true, every == 0
			case rep := <-r.opDone:
				if rep.err != nil {
					r.fail("waiting for %s: the operator failed: %v", what, rep.err)
				}
				r.operated = &rep
				r.t.Logf("%6.1fs the operator has acted on every dead letter", time.Since(r.start).Seconds())
				r.moved, ready = true, every == 0
			case <-tick.C:
				r.killDue()
			case <-check:
				ready = true
			case <-timer.C:
				r.fail("waiting for %s: nothing moved on for %s; %d rows staged by %d producers; kills %v; outcomes %v; last status: %s",
					what, idle, r.stagedCount(), len(r.staged), r.kills, r.outcomes, r.status)
			}
		}
	}
}

// progress notes the status a wait's cond read: a change moves the run on.
func (r *run) progress(status string) {
	if status != r.status {
		r.moved = true
	}
	r.status = status
}

func (r *run) stagedCount() int {
	n := 0
	for _, rows := range r.staged {
		n += len(rows)
	}
	return n
}

// killDue SIGKILLs each consumer whose time has come, while chaos lasts
// and its language was killed fewer than kills times.
func (r *run) killDue() {
	r.t.Helper()
	if !r.chaos {
		return
	}
	now := time.Now()
	for _, lang := range langs {
		p := r.consumers[lang]
		l := r.life[p]
		if !l.ready || l.killed || r.kills[lang] >= kills || now.Before(l.killAt) {
			continue
		}
		if err := p.kill(); err != nil {
			r.fail("%v", err)
		}
		l.killed = true
		r.kills[lang]++
		r.t.Logf("%6.1fs SIGKILLed %s after %d outcomes", time.Since(r.start).Seconds(), p.name, l.results)
	}
}

// stopConsumers closes each current consumer's stdin, its signal to
// stop, and waits until each has said done and exited.
func (r *run) stopConsumers() {
	r.t.Helper()
	r.stopping = true
	for _, lang := range langs {
		r.consumers[lang].close()
	}
	r.waitFor("the consumers to stop", func() bool {
		for _, lang := range langs {
			if l := r.life[r.consumers[lang]]; !l.done || !l.ended {
				return false
			}
		}
		return true
	})
}

// handle takes in one event.
func (r *run) handle(what string, ev event) {
	r.t.Helper()
	p, lang := ev.from, r.lang[ev.from]
	l := ev.line
	lf := r.life[p]
	if ev.partial && lf != nil && lf.killed {
		r.t.Logf("%s, killed, left a line cut short: %q", p.name, ev.raw)
		return
	}
	switch {
	case ev.eof:
		r.moved = true
		switch {
		case r.isPro[p]:
			if r.staged[lang] == nil || !p.ok() {
				r.fail("waiting for %s: %s ended before it finished", what, p.name)
			}
		case lf.killed:
			lf.ended = true
			if r.consumers[lang] == p {
				r.consumer(lang) // restarted, as a crashed container is
			}
		case !r.stopping || !lf.done || !p.ok():
			r.fail("waiting for %s: %s ended, unkilled, before it was stopped", what, p.name)
		default:
			lf.ended = true
		}
	case l.Ready:
		r.moved = true
		if lf == nil {
			r.readyProducers++
			return
		}
		lf.ready = true
		// Killed at a random point: up to 50 ms after its 1st to 8th
		// outcome (mid-batch, most often: a poller deletes a batch's
		// messages once all are done), or 1 to 5 s from now if it gets
		// fewer (in a long poll, most often).
		lf.killAfter = 1 + r.rng.IntN(8)
		lf.killAt = time.Now().Add(time.Second + time.Duration(r.rng.Int64N(int64(4*time.Second))))
	case r.isPro[p] && l.Staged != nil:
		r.moved = true
		r.staged[lang], r.races[lang] = l.Staged, l.Races
		r.t.Logf("%6.1fs the %s producer has staged its rows", time.Since(r.start).Seconds(), lang)
	case lf != nil && l.Outcome != "":
		r.outcome(p, lang, l)
	case lf != nil && l.Done:
		r.moved = true
		lf.done, r.done[lang] = true, l
	default:
		r.fail("%s said what it should not: %q", p.name, ev.raw)
	}
}

// outcome takes in an outcome a consumer reported.
func (r *run) outcome(p *proc, lang string, l line) {
	r.t.Helper()
	lf := r.life[p]
	lf.results++
	if lf.results == lf.killAfter {
		if at := time.Now().Add(time.Duration(r.rng.Int64N(int64(50 * time.Millisecond)))); at.Before(lf.killAt) {
			lf.killAt = at
		}
	}
	if r.outcomes[lang] == nil {
		r.outcomes[lang] = map[string]int{}
	}
	r.outcomes[lang][l.Outcome]++
	switch l.Outcome {
	case "applied", "closed", "late":
		r.moved = true
	case "duplicate", "gap", "failed", "skipped":
	default:
		r.fail("%s reported an outcome no poller reports: %q", p.name, l.Outcome)
	}
	if l.Key == "" {
		r.fail("%s reported %s of a message it could not decode: %s", p.name, l.Outcome, l.Error)
	}
	if l.Outcome == "applied" {
		if act, dead := r.plan[l.Key]; dead {
			r.fail("%s applied %s (place %d of %s), a dead letter the operator is to %s: its place was closed", p.name, l.Key, l.Seq, l.Group, act)
		}
		for _, s := range r.said[l.Key] {
			if s.outcome == "applied" {
				r.fail("%s applied %s (place %d of %s), which the %s consumer applied already (place %d of %s)",
					p.name, l.Key, l.Seq, l.Group, s.by, s.seq, s.group)
			}
		}
	}
	r.said[l.Key] = append(r.said[l.Key], said{by: lang, outcome: l.Outcome, group: l.Group, seq: l.Seq, closed: l.Closed, err: l.Error, redriven: l.Redriven})
}

// fail fails the test with every process's stderr.
func (r *run) fail(format string, args ...any) {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, format, args...)
	for _, p := range r.all {
		b.WriteString("\n\n" + p.report())
	}
	r.t.Fatal(b.String())
}

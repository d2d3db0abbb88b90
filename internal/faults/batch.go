package faults

// refusal is a batch entry an injected fault refused: its id, the fault,
// and whether it is the sender's (the message's own) fault.
type refusal struct {
	id     *string
	kind   Kind
	sender bool
}

// entryFault is the fault that refuses an entry before it is sent, if
// any: SendEntry (transient on the service's side) or SendSender.
func (p *Plan) entryFault(key, attempt string) (Kind, bool) {
	switch {
	case p.Hit(SendEntry, key, attempt):
		return SendEntry, true
	case p.Hit(SendSender, key, attempt):
		return SendSender, true
	}
	return "", false
}

// byID applies the send faults to a batch call that answers entry by id
// (SendMessageBatch, PublishBatch): a call fault on the first entry's site
// fails the call whole; an entry fault refuses its entry unsent; an entry
// sent and accepted may be reported failed all the same (SendAmbiguous,
// which opens a duplicate window). send makes the real call with the
// entries that pass and returns its accepted and failed answers, which
// come back as they are, with the refusals beside them.
func byID[E, OK, F any](p *Plan, entries []E, site func(E) (key, attempt string), id func(E) *string, okID func(OK) *string,
	send func([]E) ([]OK, []F, error)) (ok []OK, failed []F, refused []refusal, err error) {
	if len(entries) > 0 {
		if key, attempt := site(entries[0]); p.Hit(SendCall, key, attempt) {
			return nil, nil, nil, injected(SendCall)
		}
	}
	pass := make([]E, 0, len(entries))
	sites := make(map[string][2]string, len(entries)) // id -> key, attempt
	for _, e := range entries {
		key, attempt := site(e)
		if kind, hit := p.entryFault(key, attempt); hit {
			refused = append(refused, refusal{id: id(e), kind: kind, sender: kind == SendSender})
			continue
		}
		pass = append(pass, e)
		sites[deref(id(e))] = [2]string{key, attempt}
	}
	if len(pass) == 0 {
		return nil, nil, refused, nil
	}
	accepted, failed, err := send(pass)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, a := range accepted {
		if site := sites[deref(okID(a))]; p.Hit(SendAmbiguous, site[0], site[1]) {
			p.MarkDuplicateWindow(site[0])
			refused = append(refused, refusal{id: okID(a), kind: SendAmbiguous})
			continue
		}
		ok = append(ok, a)
	}
	return ok, failed, refused, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// closingSite is the attempt a fault is drawn for: a closing message's
// own, apart from its row's. A closing message counts its attempts from 1
// again under its row's key, so drawn by key and attempt alone it met
// every fault its row met at that attempt: a row refused for good at
// attempt 1 had its closing message refused too, always, and its place
// left open (an adversarial review found the outbox soak's open places
// came from this, not from the engine).
func closingSite(attempt string, closed *string) string {
	if closed == nil {
		return attempt
	}
	return attempt + " closed"
}

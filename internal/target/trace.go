package target

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/outflowhq/outflow/internal/outbox"
)

// AttrTraceParent is the row attribute that carries a W3C trace context
// (https://www.w3.org/TR/trace-context/#traceparent-header). It travels as
// a message attribute of that name to SQS and SNS and in the event to
// EventBridge; SQS messages and EventBridge events also get it in X-Ray's
// form (AWSTraceHeader, TraceHeader), so a consumer traced by X-Ray joins
// the producer's trace.
const AttrTraceParent = outbox.AttrTraceParent

var (
	traceParent = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$`)
	xrayRoot    = regexp.MustCompile(`^1-([0-9a-f]{8})-([0-9a-f]{24})$`)
	hex16       = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// ValidTraceParent reports why s is not a W3C traceparent, if it is not:
// version 00 exactly (a later version may add fields after the four), a
// trace id and parent id that are not all zeros.
func ValidTraceParent(s string) error {
	m := traceParent.FindStringSubmatch(s)
	switch {
	case m == nil || m[1] == "ff":
		return fmt.Errorf("%q is not a W3C traceparent (version-traceid-parentid-flags in lower-case hex)", s)
	case m[1] == "00" && m[5] != "":
		return fmt.Errorf("%q: a version 00 traceparent has four fields", s)
	case m[2] == strings.Repeat("0", 32) || m[3] == strings.Repeat("0", 16):
		return fmt.Errorf("%q: the trace and parent ids may not be all zeros", s)
	}
	return nil
}

// XRayHeader is a traceparent in X-Ray's trace header form,
// "Root=1-XXXXXXXX-XXXXXXXXXXXXXXXXXXXXXXXX;Parent=XXXXXXXXXXXXXXXX;Sampled=N";
// false for a value that is not a valid traceparent.
func XRayHeader(traceparent string) (string, bool) {
	if ValidTraceParent(traceparent) != nil {
		return "", false
	}
	m := traceParent.FindStringSubmatch(traceparent)
	flags, _ := strconv.ParseUint(m[4], 16, 8) // two hex digits, as matched
	sampled := strconv.FormatUint(flags&1, 10)
	return fmt.Sprintf("Root=1-%s-%s;Parent=%s;Sampled=%s", m[2][:8], m[2][8:], m[3], sampled), true
}

// TraceParentFromXRay is an X-Ray trace header (what Lambda gives a traced
// invocation) as a W3C traceparent; false when it has no Root and Parent.
func TraceParentFromXRay(header string) (string, bool) {
	var root, parent, sampled string
	for _, field := range strings.Split(header, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(field), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v
		}
	}
	m := xrayRoot.FindStringSubmatch(root)
	if m == nil || !hex16.MatchString(parent) {
		return "", false
	}
	flags := "00"
	if sampled == "1" {
		flags = "01"
	}
	tp := "00-" + m[1] + m[2] + "-" + parent + "-" + flags
	return tp, ValidTraceParent(tp) == nil
}

package delivery

import "github.com/outflowhq/outflow/internal/target"

// The target rules (route parsing, limits, validation) live in package
// target, which links no AWS SDK so that the producer can check rows
// without the SQS, SNS and EventBridge clients. The router and its callers
// read them under these names too.
type (
	// Kind is target.Kind.
	Kind = target.Kind
	// Target is target.Target.
	Target = target.Target
	// Routes is target.Routes.
	Routes = target.Routes
)

// The kinds of destination (target.Kind).
const (
	KindSQS         = target.KindSQS
	KindSNS         = target.KindSNS
	KindEventBridge = target.KindEventBridge
)

// Attribute names and limits, as package target defines them.
const (
	AttrKey         = target.AttrKey
	AttrAttempt     = target.AttrAttempt
	AttrSeq         = target.AttrSeq
	AttrRedriven    = target.AttrRedriven
	AttrEncoding    = target.AttrEncoding
	AttrTraceParent = target.AttrTraceParent
	AttrSource      = target.AttrSource
	AttrDetailType  = target.AttrDetailType
	MaxMessageBytes = target.MaxMessageBytes
)

// Errors for rows a target would refuse (package target's).
var (
	ErrGroupRequired = target.ErrGroupRequired
	ErrTooLarge      = target.ErrTooLarge
	ErrNotJSON       = target.ErrNotJSON
	ErrEventField    = target.ErrEventField
)

// ParseRoutes is target.ParseRoutes.
func ParseRoutes(s string) (Routes, error) { return target.ParseRoutes(s) }

// ParseTarget is target.ParseTarget.
func ParseTarget(s string) (Target, error) { return target.ParseTarget(s) }

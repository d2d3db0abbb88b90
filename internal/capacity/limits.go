package capacity

import (
	"math/rand/v2"
	"time"
)

// Limits are the service figures the simulation charges every call with.
type Limits struct {
	// StoreLatency is one DynamoDB request's round trip (Query, UpdateItem,
	// GetItem), paid by every attempt.
	StoreLatency time.Duration
	// SendLatency is one SQS SendMessageBatch round trip, per call of up
	// to ten messages. Standard queues have no API rate limit, so the sink
	// never throttles.
	SendLatency time.Duration
	// ShardCeiling is the write units per second one due-index shard's
	// GSI partition absorbs (DynamoDB's per-partition limit, 1,000). A
	// write whose index units do not fit is throttled.
	ShardCeiling float64
	// Burst is how many seconds of unused ceiling a shard's bucket keeps.
	Burst float64
	// SDKMaxAttempts is the DynamoDB client's attempts per request (the
	// SDK's standard retryer gives DynamoDB 4).
	SDKMaxAttempts int
	// SDKThrottleBase is the throttle backoff base: attempt i (1-based)
	// waits a uniform random delay in [0, base·2^(i−1)), at most
	// SDKMaxBackoff.
	SDKThrottleBase time.Duration
	// SDKMaxBackoff caps one backoff delay.
	SDKMaxBackoff time.Duration
	// SDKRetryTokens is the client's retry quota; a throttled retry costs
	// SDKThrottleCost, a first-attempt success gives one back, a
	// successful retry refunds its cost. An empty quota fails the request
	// at once.
	SDKRetryTokens, SDKThrottleCost int
}

// DefaultLimits are the figures the report uses: 5 ms DynamoDB, 15 ms SQS,
// 1,000 WCU/s per shard with a second of burst, and the retry behaviour of
// the aws-sdk-go-v2 version in go.mod (retry.NewStandard as the DynamoDB
// client configures it: 4 attempts, throttles backed off from 1 s, 20 s
// cap, a 500-token quota at 5 per throttled retry).
func DefaultLimits() Limits {
	return Limits{
		StoreLatency:    5 * time.Millisecond,
		SendLatency:     15 * time.Millisecond,
		ShardCeiling:    1000,
		Burst:           1,
		SDKMaxAttempts:  4,
		SDKThrottleBase: time.Second,
		SDKMaxBackoff:   20 * time.Second,
		SDKRetryTokens:  500,
		SDKThrottleCost: 5,
	}
}

// backoff is the SDK's delay before the retry that follows attempt.
func (l Limits) backoff(attempt int) time.Duration {
	d := l.SDKThrottleBase << (attempt - 1)
	if d > l.SDKMaxBackoff || d <= 0 {
		d = l.SDKMaxBackoff
	}
	return time.Duration(rand.Float64() * float64(d))
}

// The index write units each transition costs on its row's due-index
// shard (docs/architecture.md, "What each transition costs in index
// writes"): the claim and the release leave the index alone.
const (
	wcuStage = 1
	wcuClaim = 0
	wcuDone  = 1
	wcuRetry = 2
	wcuDead  = 1
)

package bench

// Price is one public on-demand price, in US dollars per Per units.
type Price struct {
	Item   string
	Dollar float64
	Per    float64
	Unit   string
	// Note says what the price covers or leaves out.
	Note string
	// Source is the page the price, and the note's billing rule, were
	// read from.
	Source string
}

// Each is the price of one unit.
func (p Price) Each() float64 { return p.Dollar / p.Per }

// PricesRegion and PricesRead say where and when the prices below were
// read: the public pricing pages and pages quoting them, found through a
// documentation search. Rerunning the bench does not refresh them; edit
// the table when AWS changes a price.
const (
	PricesRegion = "us-east-1"
	PricesRead   = "2026-12-03"
)

// The pages the prices were read from.
const (
	srcDynamoDB     = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
	srcItemSizes    = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html"
	srcTransactions = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html"
	srcSQS          = "https://aws.amazon.com/sqs/pricing/"
	srcSNS          = "https://aws.amazon.com/sns/pricing/"
	srcSNSBatch     = "https://docs.aws.amazon.com/sns/latest/dg/sns-batch-api-actions.html"
	srcLambda       = "https://aws.amazon.com/lambda/pricing/"
	srcEventBridge  = "https://aws.amazon.com/eventbridge/pricing/"
)

// The prices the cost model uses (us-east-1, on-demand, no free tier).
var (
	PriceWRU = Price{Item: "DynamoDB on-demand write request unit", Dollar: 0.625, Per: 1e6, Unit: "WRU",
		Note: "one per KB written, per table or index write; twice for a write inside a transaction", Source: srcDynamoDB + " and " + srcTransactions}
	PriceRRU = Price{Item: "DynamoDB on-demand read request unit", Dollar: 0.125, Per: 1e6, Unit: "RRU",
		Note: "a consistent read of up to 4 KB; an eventually consistent one is half", Source: srcDynamoDB}
	PriceStorage = Price{Item: "DynamoDB data storage, Standard table class", Dollar: 0.25, Per: 1, Unit: "GB-month",
		Note: "an item's size plus 100 bytes of overhead; the first 25 GB a month are free", Source: srcDynamoDB + " and " + srcItemSizes}
	PriceStreamRead = Price{Item: "DynamoDB Streams read request unit", Dollar: 0.02, Per: 1e5, Unit: "GetRecords",
		Note: "free for GetRecords made by a Lambda trigger (event source mapping)", Source: srcDynamoDB}
	PriceSQSStandard = Price{Item: "SQS standard queue request", Dollar: 0.40, Per: 1e6, Unit: "request",
		Note: "per 64 KB chunk of a request's payload: a SendMessageBatch of up to 10 small messages is one", Source: srcSQS}
	PriceSQSFIFO = Price{Item: "SQS FIFO queue request", Dollar: 0.50, Per: 1e6, Unit: "request",
		Note: "per 64 KB chunk of a request's payload", Source: srcSQS}
	PriceSNS = Price{Item: "SNS standard topic request (Publish, PublishBatch)", Dollar: 0.50, Per: 1e6, Unit: "request",
		Note: "per 64 KB chunk of a request's published data: a PublishBatch of up to 10 small messages is one (batching \"can reduce the costs ... by a factor of up to 10\"); deliveries to SQS subscriptions are free", Source: srcSNS + " and " + srcSNSBatch}
	PriceEventBridgeEvent = Price{Item: "EventBridge custom event (PutEvents)", Dollar: 1.00, Per: 1e6, Unit: "event",
		Note: "per entry and per 64 KB chunk of it: a PutEvents of 10 entries is 10 events; delivery to a rule's targets included", Source: srcEventBridge}
	PriceLambdaRequest = Price{Item: "Lambda request", Dollar: 0.20, Per: 1e6, Unit: "invocation", Source: srcLambda}
	PriceLambdaARM     = Price{Item: "Lambda duration, arm64", Dollar: 0.0000133334, Per: 1, Unit: "GB-second",
		Note: "first pricing tier (7.5 billion GB-s a month)", Source: srcLambda}
	PriceScheduler = Price{Item: "EventBridge Scheduler invocation", Dollar: 1.00, Per: 1e6, Unit: "invocation", Source: srcEventBridge}
	PricePipes     = Price{Item: "EventBridge Pipes request", Dollar: 0.40, Per: 1e6, Unit: "request",
		Note: "per 64 KB chunk of an event, counted after the pipe's filter", Source: srcEventBridge}
)

// Prices lists every price the model uses, for the doc.
var Prices = []Price{PriceWRU, PriceRRU, PriceStorage, PriceStreamRead, PriceSQSStandard, PriceSQSFIFO, PriceSNS, PriceEventBridgeEvent, PriceLambdaRequest, PriceLambdaARM, PriceScheduler, PricePipes}

package bench

// Price is one public on-demand price, in US dollars per Per units.
type Price struct {
	Item   string
	Dollar float64
	Per    float64
	Unit   string
	// Note says what the price covers or leaves out.
	Note string
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

// The prices the cost model uses (us-east-1, on-demand, no free tier).
var (
	PriceWRU = Price{Item: "DynamoDB on-demand write request unit", Dollar: 0.625, Per: 1e6, Unit: "WRU",
		Note: "one per KB written, per table or index write; twice for a write inside a transaction"}
	PriceRRU = Price{Item: "DynamoDB on-demand read request unit", Dollar: 0.125, Per: 1e6, Unit: "RRU",
		Note: "a consistent read of up to 4 KB; an eventually consistent one is half"}
	PriceStreamRead = Price{Item: "DynamoDB Streams read request unit", Dollar: 0.02, Per: 1e5, Unit: "GetRecords",
		Note: "free for GetRecords made by a Lambda trigger (event source mapping)"}
	PriceSQSStandard = Price{Item: "SQS standard queue request", Dollar: 0.40, Per: 1e6, Unit: "request",
		Note: "per 64 KB chunk of a request's payload"}
	PriceSQSFIFO = Price{Item: "SQS FIFO queue request", Dollar: 0.50, Per: 1e6, Unit: "request",
		Note: "per 64 KB chunk of a request's payload"}
	PriceLambdaRequest = Price{Item: "Lambda request", Dollar: 0.20, Per: 1e6, Unit: "invocation"}
	PriceLambdaARM     = Price{Item: "Lambda duration, arm64", Dollar: 0.0000133334, Per: 1, Unit: "GB-second",
		Note: "first pricing tier (7.5 billion GB-s a month)"}
	PriceScheduler = Price{Item: "EventBridge Scheduler invocation", Dollar: 1.00, Per: 1e6, Unit: "invocation"}
	PricePipes     = Price{Item: "EventBridge Pipes request", Dollar: 0.40, Per: 1e6, Unit: "request",
		Note: "per 64 KB chunk of an event, counted after the pipe's filter"}
)

// Prices lists every price the model uses, for the doc.
var Prices = []Price{PriceWRU, PriceRRU, PriceStreamRead, PriceSQSStandard, PriceSQSFIFO, PriceLambdaRequest, PriceLambdaARM, PriceScheduler, PricePipes}

package bench

import (
	"math"
	"time"
)

// Usage is what one delivered message consumes of each billed unit, on one
// delivery path, staging included.
type Usage struct {
	Name string
	// TableWRU and IndexWRU are write request units on the table and on
	// the due index; RRU read request units on either.
	TableWRU, IndexWRU, RRU float64
	// DynamoDBRequests are every table and index request, staging
	// included; GetRecords every stream read, charged or not.
	DynamoDBRequests, GetRecords float64
	// StreamReads are charged GetRecords calls (zero where Lambda's
	// event source mapping reads the stream: those are free).
	StreamReads float64
	// SQSRequests are billed SQS requests (64 KB chunks), priced as a
	// FIFO queue's when SQSFIFO is set; SNSRequests billed SNS requests
	// (64 KB chunks of a Publish or PublishBatch); EventBridgeEvents
	// billed PutEvents entries (64 KB chunks of each).
	SQSRequests, SNSRequests, EventBridgeEvents float64
	SQSFIFO                                     bool
	// StageTableWRU is the table's write units of the row's staging put,
	// which staging it inside a transaction doubles (see InTransaction).
	StageTableWRU float64
	// LambdaInvocations and LambdaGBs are the function's requests and
	// duration in GB-seconds.
	LambdaInvocations, LambdaGBs float64
	// SchedulerInvocations and PipesRequests are EventBridge's.
	SchedulerInvocations, PipesRequests float64
}

// LineItem is one line of a bill: dollars per million messages.
type LineItem struct {
	Name    string
	Dollars float64
}

// LineNames are the bill's lines, in order.
var LineNames = []string{
	"DynamoDB writes, table",
	"DynamoDB writes, due index",
	"DynamoDB reads",
	"DynamoDB Streams reads",
	"SQS requests",
	"SNS requests",
	"EventBridge events",
	"Lambda requests",
	"Lambda duration (arm64)",
	"EventBridge Scheduler",
	"EventBridge Pipes",
}

// PerMillion is the bill of a million messages, line by line, in
// LineNames' order.
func (u Usage) PerMillion() []LineItem {
	m := 1e6
	sqs := PriceSQSStandard
	if u.SQSFIFO {
		sqs = PriceSQSFIFO
	}
	d := []float64{
		u.TableWRU * PriceWRU.Each() * m,
		u.IndexWRU * PriceWRU.Each() * m,
		u.RRU * PriceRRU.Each() * m,
		u.StreamReads * PriceStreamRead.Each() * m,
		u.SQSRequests * sqs.Each() * m,
		u.SNSRequests * PriceSNS.Each() * m,
		u.EventBridgeEvents * PriceEventBridgeEvent.Each() * m,
		u.LambdaInvocations * PriceLambdaRequest.Each() * m,
		u.LambdaGBs * PriceLambdaARM.Each() * m,
		u.SchedulerInvocations * PriceScheduler.Each() * m,
		u.PipesRequests * PricePipes.Each() * m,
	}
	out := make([]LineItem, len(d))
	for i := range d {
		out[i] = LineItem{Name: LineNames[i], Dollars: d[i]}
	}
	return out
}

// Target is the kind of route a message goes to.
type Target string

// The targets Outflow delivers to.
const (
	TargetSQS         Target = "SQS standard queue"
	TargetSQSFIFO     Target = "SQS FIFO queue"
	TargetSNS         Target = "SNS standard topic"
	TargetEventBridge Target = "EventBridge bus"
)

// Targets lists them, for the doc.
var Targets = []Target{TargetSQS, TargetSQSFIFO, TargetSNS, TargetEventBridge}

// To is u, measured sending to an SQS standard queue, sending to target
// t instead: the same send requests (every path batches the same way
// whatever the target: Outflow up to 10 rows a request, a relay one event
// a request), billed by t's rule for messages under 64 KB: SQS and SNS
// per request, EventBridge per entry, so one event a message.
func (u Usage) To(t Target) Usage {
	reqs := u.SQSRequests
	u.SQSRequests, u.SNSRequests, u.EventBridgeEvents, u.SQSFIFO = 0, 0, 0, false
	switch t {
	case TargetSQS:
		u.SQSRequests = reqs
	case TargetSQSFIFO:
		u.SQSRequests, u.SQSFIFO = reqs, true
	case TargetSNS:
		u.SNSRequests = reqs
	case TargetEventBridge:
		u.EventBridgeEvents = 1
	}
	return u
}

// InTransaction is u with the row staged inside the application's own
// TransactWriteItems (TransactItem) rather than by its own PutItem: the
// row's put costs twice its table write units there; its index write,
// propagated after the commit, does not change.
func (u Usage) InTransaction() Usage {
	u.TableWRU += u.StageTableWRU
	u.StageTableWRU *= 2
	return u
}

// WriteUnitsBySize is the rule behind the measured write units per
// message, for a row of itemBytes: the staging put (ceil(size / 1 KB)
// table units, twice inside a transaction) and its index entry, the claim
// and the done (the item as grown by the claim, claimBytes more, and the
// done's index write). An ordered row is staged in a transaction with its
// group item (under 1 KB, so 2 units), whichever way the application
// stages it; transact stages an unordered row in the application's
// transaction (TransactItem).
func WriteUnitsBySize(itemBytes int, ordered, transact bool) (table, index float64) {
	kb := func(n int) float64 { return math.Ceil(float64(max(n, 1)) / 1024) }
	stage := kb(itemBytes)
	if ordered || transact {
		stage *= 2
	}
	if ordered {
		stage += 2
	}
	return stage + 2*kb(itemBytes+claimBytes), float64(IndexWrites["stage"] + IndexWrites["done"])
}

// Total is the sum of the bill's lines.
func Total(lines []LineItem) float64 {
	t := 0.0
	for _, l := range lines {
		t += l.Dollars
	}
	return t
}

// noIndex prices every transition with no index write: the table's share.
var noIndex = map[string]int{}

// writeUnits splits the write units of stage and dispatch into the
// table's and the due index's, per message.
func writeUnits(rows int, reqs ...*Requests) (table, index float64) {
	all, tbl := 0.0, 0.0
	for _, r := range reqs {
		all += r.WCU(IndexWrites)
		tbl += r.WCU(noIndex)
	}
	n := float64(max(rows, 1))
	return tbl / n, (all - tbl) / n
}

// QueryRRU is an upper bound on the read units of one due-index query: a
// full page of pageSize entries, each as large as the staged item,
// eventually consistent (half a unit per 4 KB).
func QueryRRU(pageSize, itemSize int) float64 {
	return math.Ceil(float64(pageSize*itemSize)/4096) / 2
}

// DrainUsage is the usage of a drain against moto (the sweep or the naive
// loop): its measured writes, queries, consistent reads and SQS requests
// per message, with a Lambda of memoryMB running for secondsPerRow per row
// and one invocation, and one schedule firing, for the whole drain.
func DrainUsage(name string, r MotoResult, pageSize int, memoryMB int, secondsPerRow float64) Usage {
	n := float64(max(r.Throughput.Rows, 1))
	u := Usage{Name: name}
	u.TableWRU, u.IndexWRU = writeUnits(r.Throughput.Rows, r.Stage, r.Dispatch)
	u.StageTableWRU, _ = writeUnits(r.Throughput.Rows, r.Stage)
	u.RRU = (float64(r.Dispatch.Count("DynamoDB.Query"))*QueryRRU(pageSize, r.ItemSize) + float64(r.Dispatch.Count("DynamoDB.GetItem"))) / n
	u.SQSRequests = float64(r.Dispatch.Total("SQS", false)) / n
	u.DynamoDBRequests = float64(dataRequests(r.Stage)+dataRequests(r.Dispatch)) / n
	u.LambdaInvocations, u.SchedulerInvocations = 1/n, 1/n
	u.LambdaGBs = float64(memoryMB) / 1024 * secondsPerRow
	return u
}

// WakeUsage is the usage of the wake path from a run with the wake alone:
// staging and the wake's writes, reads and SQS requests per delivered
// message, its invocations per message, and a Lambda of memoryMB running
// secondsPerRow per row. The stream's GetRecords are Lambda's, so free.
func WakeUsage(r StreamResult, memoryMB int, secondsPerRow float64) Usage {
	return StreamUsage("Outflow, wake", r, memoryMB, secondsPerRow)
}

// LeanUsage is WakeUsage for a run whose rows were staged lean: out of the
// due index, so its write units on the index are the ones the recorded
// writes made there (none, when the wake settled every row).
func LeanUsage(r StreamResult, memoryMB int, secondsPerRow float64) Usage {
	return StreamUsage("Outflow, lean", r, memoryMB, secondsPerRow)
}

// StreamUsage is the usage, under name, of a run with the wake alone.
func StreamUsage(name string, r StreamResult, memoryMB int, secondsPerRow float64) Usage {
	n := float64(max(r.WakeDelivered, 1))
	u := Usage{Name: name}
	u.TableWRU, u.IndexWRU = writeUnits(r.WakeDelivered, r.Stage, r.Wake)
	u.StageTableWRU, _ = writeUnits(r.WakeDelivered, r.Stage)
	u.RRU = float64(r.Wake.Count("DynamoDB.GetItem")) / n
	u.SQSRequests = float64(r.Wake.Total("SQS", false)) / n
	u.DynamoDBRequests = float64(dataRequests(r.Stage)+dataRequests(r.Wake)) / n
	u.GetRecords = float64(r.Stream.Count("DynamoDB Streams.GetRecords")) / n
	u.LambdaInvocations = float64(r.WakeRuns) / n
	u.LambdaGBs = float64(memoryMB) / 1024 * secondsPerRow
	return u
}

// PipesUsage models a relay from the table's stream to SQS with
// EventBridge Pipes: the same staging writes as the sweep's drain (row
// and due-index entry), the stream read by the pipe at getRecordsPerRow
// charged calls per message, one Pipes request and one SQS SendMessage
// per message, and no settle: the row is left to expire by TTL (TTL
// deletes are free, and the pipe's filter drops their stream records).
func PipesUsage(staging MotoResult, getRecordsPerRow float64) Usage {
	u := Usage{Name: "EventBridge Pipes relay"}
	u.TableWRU, u.IndexWRU = writeUnits(staging.Throughput.Rows, staging.Stage)
	u.StageTableWRU = u.TableWRU
	u.StreamReads, u.GetRecords = getRecordsPerRow, getRecordsPerRow
	u.DynamoDBRequests = float64(dataRequests(staging.Stage)) / float64(max(staging.Throughput.Rows, 1))
	u.SQSRequests = 1
	u.PipesRequests = 1
	return u
}

// dataRequests are a counter's DynamoDB requests other than the table's
// creation, waits and deletion.
func dataRequests(r *Requests) int {
	n := r.Total("DynamoDB", false)
	for _, op := range []string{"CreateTable", "DescribeTable", "UpdateTimeToLive", "DeleteTable"} {
		n -= r.Count("DynamoDB." + op)
	}
	return n
}

// BackstopModel prices the lean backstop's scheduled runs over a table of
// Items items: one run per sweep, every Period, each scanning up to Pages
// pages of up to PageSize items (a page ends at 1 MB too). The scan's read
// units grow linearly with the items it evaluates, at RRUPerItem (measured
// on a pass: DynamoDB bills a page by the bytes of every item it read,
// filter or not); each run also reads the backstop item (ReadsPerRun
// consistent reads of under 4 KB, one unit each) and saves it
// (SavesPerRun writes of under 1 KB, one unit each).
type BackstopModel struct {
	Items                    int
	ItemBytes, RRUPerItem    float64
	Pages, PageSize          int
	ReadsPerRun, SavesPerRun float64
	Period, Grace            time.Duration
}

// scanPageBytes is where DynamoDB ends a Scan page whatever its Limit.
const scanPageBytes = 1 << 20

// ItemsPerPage is how many items one page evaluates.
func (m BackstopModel) ItemsPerPage() int {
	n := m.PageSize
	if m.ItemBytes > 0 {
		n = min(n, int(scanPageBytes/m.ItemBytes))
	}
	return max(n, 1)
}

// PagesPerPass is the Scan pages of one pass over the table: at least one.
func (m BackstopModel) PagesPerPass() int {
	per := m.ItemsPerPage()
	return max((m.Items+per-1)/per, 1)
}

// RunsPerPass is the runs, one per sweep, that one pass takes.
func (m BackstopModel) RunsPerPass() int {
	return (m.PagesPerPass() + max(m.Pages, 1) - 1) / max(m.Pages, 1)
}

// PassTime is how long a pass takes at one run per Period.
func (m BackstopModel) PassTime() time.Duration {
	return time.Duration(m.RunsPerPass()) * m.Period
}

// LongestWait bounds how long a row the stream missed waits before the
// backstop puts it in the due index: the grace, before which it is not
// taken for missed, a whole pass, if the scan had just passed its place,
// and a period for the sweep that then runs.
func (m BackstopModel) LongestWait() time.Duration {
	return m.Grace + m.PassTime() + m.Period
}

// RRUPerRun is a run's read units, averaged over a pass: the scan's
// (at least one page's minimum, half a unit) and the backstop item's read.
func (m BackstopModel) RRUPerRun() float64 {
	scan := max(m.RRUPerItem*float64(m.Items), ScanRRU(0, false)*float64(m.PagesPerPass()))
	return scan/float64(m.RunsPerPass()) + m.ReadsPerRun
}

// DollarsPerHour is the backstop's cost an hour: its reads and saves.
func (m BackstopModel) DollarsPerHour() float64 {
	runs := float64(time.Hour) / float64(m.Period)
	return runs * (m.RRUPerRun()*PriceRRU.Each() + m.SavesPerRun*PriceWRU.Each())
}

// PerMillion is the backstop's cost per million messages at rate messages
// a second.
func (m BackstopModel) PerMillion(rate float64) float64 {
	return m.DollarsPerHour() / (rate * 3600) * 1e6
}

// StoragePerMillion is what keeping each of a million messages as an item
// of itemBytes for retention costs in storage: DynamoDB bills an item's
// size plus 100 bytes, per GB-month.
func StoragePerMillion(itemBytes float64, retention time.Duration) float64 {
	const month = 30 * 24 * time.Hour
	gb := (itemBytes + storageOverheadBytes) / (1 << 30)
	return 1e6 * gb * retention.Hours() / month.Hours() * PriceStorage.Dollar / PriceStorage.Per
}

// storageOverheadBytes is what DynamoDB adds to every item's size for
// storage.
const storageOverheadBytes = 100

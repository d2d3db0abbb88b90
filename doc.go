// Package outflow is how applications stage outbox rows for Outflow to
// deliver to their routes: SQS queues, SNS topics and EventBridge buses.
//
// Build a Row, then either Put it on its own, or add TransactItem(row) to the
// TransactWriteItems that also writes your business data, so the message is
// sent if and only if your write commits:
//
//	p, err := outflow.NewProducer(dynamodbClient, outflow.Config{Table: "outbox"})
//	item, err := p.TransactItem(outflow.Row{Queue: "orders", Payload: body})
//	items := []types.TransactWriteItem{orderPut, item}
//	_, err = dynamodbClient.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
//	err = p.Classify(ctx, err, items) // says which item lost the transaction, and why
//
// or let Transact append the rows' writes to yours, send them, and
// classify the error. A canceled transaction wrote nothing; its
// *TransactError names each failed item: a key already staged with the
// same content (ErrAlreadyStaged) or not (ErrKeyConflict), your own
// condition (ErrConditionFailed), an ordered group's moved tail
// (ErrGroupRace), another transaction holding an item
// (ErrTransactionConflict) or an item over capacity (ErrThrottled).
//
// Every row is validated here, at the edge, against what its route's
// target will accept (Config.Routes; without routes, SQS's rules), so a
// bad row is an error for its producer rather than a dead letter later.
// The checks are the dispatcher's own. Delivery is at least once:
// consumers drop duplicates by the row's Key, which a queue or topic
// message carries as its outflow.key attribute and an event in the key
// of its detail's outflow member.
//
// NewProducer takes a DynamoDB, the three item methods of
// *dynamodb.Client it calls. Importing this package links the DynamoDB
// client only, not the SQS, SNS or EventBridge ones the dispatcher sends
// with.
package outflow

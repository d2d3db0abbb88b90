// Package outflow is how applications stage outbox rows for Outflow to
// deliver to SQS.
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
// (ErrGroupRace) or another transaction holding an item
// (ErrTransactionConflict).
//
// Every row is validated here, at the edge, against what SQS will accept,
// so a bad row is an error for its producer rather than a dead letter
// later. Delivery is at least once: consumers drop duplicates by the
// outflow.key message attribute, which is the row's Key.
package outflow

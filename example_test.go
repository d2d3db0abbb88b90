package outflow_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// exampleTable gives the examples a real table on the test endpoint. In an
// application, use dynamodb.NewFromConfig and your deployed table's name.
func exampleTable() (*dynamodb.Client, string) {
	cfg, err := awstest.Config(context.Background(), awstest.Endpoint())
	if err != nil {
		panic(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	name := awstest.UniqueName("outflow-example")
	if err := dynamo.CreateTable(context.Background(), client, name); err != nil {
		panic(err)
	}
	return client, name
}

func ExampleRow_Validate() {
	row := outflow.Row{Queue: "events.fifo", Payload: []byte(`{"id":7}`)}
	err := row.Validate(0)
	fmt.Println(errors.Is(err, outflow.ErrGroupRequired))
	// Output: true
}

func ExampleProducer_Put() {
	client, table := exampleTable()
	p, err := outflow.NewProducer(client, outflow.Config{Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	keys, err := p.Put(context.Background(), outflow.Row{
		Key:        "invoice-7",
		Queue:      "billing",
		Payload:    []byte(`{"invoice":7}`),
		Attributes: map[string]string{"type": "invoice.issued"},
		NotBefore:  time.Now().Add(time.Minute), // deliver in a minute
	})
	fmt.Println(keys, err)
	// Output: [invoice-7] <nil>
}

func ExampleProducer_TransactItem() {
	client, table := exampleTable()
	p, err := outflow.NewProducer(client, outflow.Config{Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	msg, err := p.TransactItem(outflow.Row{Key: "order-42-created", Queue: "orders", Payload: []byte(`{"order":42}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	order := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table), // usually your own table
		Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "order#42"}},
	}}
	_, err = client.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{order, msg},
	})
	fmt.Println("committed:", err == nil)
	// Output: committed: true
}

func ExampleProducer_Transact() {
	client, table := exampleTable()
	p, err := outflow.NewProducer(client, outflow.Config{Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	order := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
		TableName:           aws.String(table), // usually your own table
		Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "order#42"}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}}}
	msg := outflow.Row{Key: "order-42-created", Queue: "orders", Payload: []byte(`{"order":42}`)}
	keys, err := p.Transact(ctx, order, msg)
	fmt.Println(keys, err)

	// The same transaction again: both its items fail, and nothing is written.
	_, err = p.Transact(ctx, order, msg)
	var txErr *outflow.TransactError
	if errors.As(err, &txErr) {
		for _, item := range txErr.Items {
			fmt.Println(item.Index, errors.Is(item, outflow.ErrConditionFailed), errors.Is(item, outflow.ErrAlreadyStaged))
		}
		fmt.Println("retry may help:", txErr.Retryable())
	}
	// Output:
	// [order-42-created] <nil>
	// 0 true false
	// 1 false true
	// retry may help: false
}

func ExampleProducer_Classify() {
	client, table := exampleTable()
	p, err := outflow.NewProducer(client, outflow.Config{Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if _, err := p.Put(ctx, outflow.Row{Key: "invoice-7", Queue: "billing", Payload: []byte("v1")}); err != nil {
		fmt.Println(err)
		return
	}
	msg, err := p.TransactItem(outflow.Row{Key: "invoice-7", Queue: "billing", Payload: []byte("v2")})
	if err != nil {
		fmt.Println(err)
		return
	}
	items := []types.TransactWriteItem{msg}
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	err = p.Classify(ctx, err, items)
	fmt.Println(errors.Is(err, outflow.ErrKeyConflict))
	fmt.Println(err)
	// Output:
	// true
	// transaction canceled, nothing written: item 0 (outbox row invoice-7): key already staged with different content
}

package dynamo_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

func TestCreateTable_SurvivesARetryOfACreateWhoseResponseWasLost(t *testing.T) {
	t.Parallel()
	cfg := awstest.TestConfig(t)
	transport := awstest.LoseFirstAnswer("CreateTable")
	cfg.HTTPClient = sdkhttp.Client(&http.Client{Transport: transport})
	client := dynamodb.NewFromConfig(cfg)
	name := awstest.UniqueName("outflow-create")
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), client, name) })

	require.NoError(t, dynamo.CreateTable(context.Background(), client, name))
	require.True(t, transport.Lost(), "the first response was lost")
	out, err := client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.Equal(t, types.TableStatusActive, out.Table.TableStatus)
}

func TestCreateTable_RefusesANameAlreadyTaken(t *testing.T) {
	t.Parallel()
	client := awstest.DynamoDB(t)
	name := awstest.NewTable(t)
	err := dynamo.CreateTable(context.Background(), client, name)
	var inUse *types.ResourceInUseException
	require.ErrorAs(t, err, &inUse)
}

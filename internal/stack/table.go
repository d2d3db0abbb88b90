package stack

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Table is an AWS::DynamoDB::Table's properties, as far as Outflow uses them.
type Table struct {
	BillingMode          string
	AttributeDefinitions []types.AttributeDefinition
	KeySchema            []types.KeySchemaElement
	// GlobalSecondaryIndexes decode into the SDK type: CloudFormation and
	// the API name these fields alike.
	GlobalSecondaryIndexes []types.GlobalSecondaryIndex
	StreamSpecification    struct{ StreamViewType types.StreamViewType }
	// SSESpecification names a customer managed key (SSEType KMS and
	// KMSMasterKeyId) only when the template's KmsKeyArn is set.
	SSESpecification struct {
		SSEEnabled     bool
		SSEType        string
		KMSMasterKeyId string
	}
	TimeToLiveSpecification struct {
		AttributeName string
		Enabled       bool
	}
	PointInTimeRecoverySpecification struct{ PointInTimeRecoveryEnabled bool }
	// DeletionProtectionEnabled is TableDeletionProtection. CreateTableInput
	// leaves it out: the tables it makes serve make run and tests, and are
	// deleted at will.
	DeletionProtectionEnabled bool
}

// Table decodes the table resource with the given logical name.
func (t *Template) Table(logical string) (Table, error) {
	var tb Table
	r, ok := t.Resources[logical]
	if !ok || r.Type != "AWS::DynamoDB::Table" {
		return tb, fmt.Errorf("no AWS::DynamoDB::Table named %s in the template", logical)
	}
	if err := r.Decode(&tb); err != nil {
		return tb, fmt.Errorf("table %s: %w", logical, err)
	}
	return tb, nil
}

// CreateTableInput is the request that creates this table under name.
func (tb Table) CreateTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:              aws.String(name),
		BillingMode:            types.BillingMode(tb.BillingMode),
		AttributeDefinitions:   tb.AttributeDefinitions,
		KeySchema:              tb.KeySchema,
		GlobalSecondaryIndexes: tb.GlobalSecondaryIndexes,
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(tb.StreamSpecification.StreamViewType != ""),
			StreamViewType: tb.StreamSpecification.StreamViewType,
		},
		SSESpecification: &types.SSESpecification{Enabled: aws.Bool(tb.SSESpecification.SSEEnabled)},
	}
}

// Queue is an AWS::SQS::Queue's properties, as far as Outflow uses them.
type Queue struct {
	FifoQueue              bool
	SqsManagedSseEnabled   bool
	KmsMasterKeyId         string
	MessageRetentionPeriod int
	RedrivePolicy          *struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}
}

// Queues decodes every AWS::SQS::Queue, by logical name.
func (t *Template) Queues() (map[string]Queue, error) {
	out := map[string]Queue{}
	for _, name := range t.OfType("AWS::SQS::Queue") {
		var q Queue
		if err := t.Resources[name].Decode(&q); err != nil {
			return nil, fmt.Errorf("queue %s: %w", name, err)
		}
		out[name] = q
	}
	return out, nil
}

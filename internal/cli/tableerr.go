package cli

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// nameTable makes every error of a DynamoDB client's calls a
// *dynamo.TableError for table: a wrong --table reads `table "x": not
// found in region R at endpoint E (ResourceNotFoundException)`, not the
// SDK's bare "Requested resource not found", whichever command, store or
// producer makes the call. The producer's LoadPublished names a missing
// table the same way.
func nameTable(table string) func(*dynamodb.Options) { return dynamo.NameTableErrors(table) }

package outflow_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
)

// A *dynamodb.Client is what most callers hand NewProducer.
var _ outflow.DynamoDB = (*dynamodb.Client)(nil)

// TestProducer_LinksNoTargetSDK keeps an application that imports only
// the producer small: it checks rows with internal/target's rules and
// links none of the SDKs the dispatcher sends with.
func TestProducer_LinksNoTargetSDK(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/aws/aws-sdk-go-v2/service/dynamodb", "the list is the producer's")
	for _, banned := range []string{
		"github.com/aws/aws-sdk-go-v2/service/sqs",
		"github.com/aws/aws-sdk-go-v2/service/sns",
		"github.com/aws/aws-sdk-go-v2/service/eventbridge",
		"github.com/outflowhq/outflow/internal/delivery",
	} {
		require.NotContains(t, deps, banned, "the producer links %s", banned)
	}
}

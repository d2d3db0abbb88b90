package stack_test

import (
	"os"
	"testing"

	"github.com/outflowhq/outflow/internal/awstest"
)

// TestMain starts the moto server the deployed-stack test creates its
// stack on (or uses OUTFLOW_TEST_ENDPOINT).
func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

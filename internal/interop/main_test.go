package interop_test

import (
	"os"
	"testing"

	"github.com/outflowhq/outflow/internal/awstest"
)

func TestMain(m *testing.M) {
	if os.Getenv(goConsumerEnv) != "" {
		os.Exit(goConsumer()) // this binary started again by the test, as its Go consumer
	}
	os.Exit(awstest.Main(m))
}

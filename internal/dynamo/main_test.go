package dynamo_test

import (
	"flag"
	"os"
	"testing"

	"github.com/outflowhq/outflow/internal/awstest"
)

func TestMain(m *testing.M) {
	// Each rapid check runs dozens of real requests; 30 keep make test
	// quick. Pass -rapid.checks=N for a deeper run.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		_ = flag.Set("rapid.checks", "30")
	}
	os.Exit(awstest.Main(m))
}

// Package awstest gives tests a real AWS API endpoint: the moto server,
// started once per test binary on a free loopback port and stopped when the
// tests end, or whatever endpoint OUTFLOW_TEST_ENDPOINT names (LocalStack,
// or real AWS), in which case nothing is started. Every table and queue a
// test makes has a unique name and is deleted after it, so tests run in
// parallel and against a shared endpoint.
package awstest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/outflowhq/outflow/internal/moto"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// EndpointEnv names the variable that points tests at an existing endpoint.
const EndpointEnv = "OUTFLOW_TEST_ENDPOINT"

// endpoint is the URL every client of this test binary uses.
var endpoint string

// Main runs the tests of a package against the endpoint, starting the moto
// server first if none is given. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }
func Main(m *testing.M) int {
	if ep := os.Getenv(EndpointEnv); ep != "" {
		endpoint = ep
		return m.Run()
	}
	srv, err := moto.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "awstest:", err)
		return 1
	}
	defer srv.Stop()
	endpoint = srv.URL
	return m.Run()
}

// Endpoint is the URL tests talk to.
func Endpoint() string { return endpoint }

// Config is an AWS config for the endpoint. Without credentials in the
// environment it uses static test ones, which moto and LocalStack accept.
func Config(ctx context.Context, ep string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithRegion(region())}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	cfg.BaseEndpoint = aws.String(ep)
	// sdkhttp: a request the server answered is not sent again, which
	// would make a second message or a refused conditional write.
	cfg.HTTPClient = sdkhttp.Client(cfg.HTTPClient)
	return cfg, nil
}

func region() string {
	if r := os.Getenv("AWS_REGION"); r != "" {
		return r
	}
	return "us-east-1"
}

// TestConfig is Config for the test endpoint, failing t on error.
func TestConfig(t testing.TB) aws.Config {
	t.Helper()
	cfg, err := Config(context.Background(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// UniqueName is prefix plus a random suffix, valid as a table or queue name.
func UniqueName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:12])
}

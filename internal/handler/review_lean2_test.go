package handler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/handler"
)

// TestReviewLean2_ASweepOfAStackThatNeverRanLeanScansNoTable: the
// backstop's default drain is 0 (for ever once lean was on), so a stack
// that never ran lean must still pay nothing: no Scan of the table, from
// any number of scheduled sweeps (the audit's Scan of the due index is
// not the backstop's).
func TestReviewLean2_ASweepOfAStackThatNeverRanLeanScansNoTable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	var mu sync.Mutex
	tableScans := 0
	cfg := awstest.TestConfig(t)
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("review-count-scans",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if s, ok := in.Parameters.(*dynamodb.ScanInput); ok && aws.ToString(s.IndexName) == "" {
					mu.Lock()
					tableScans++
					mu.Unlock()
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue}
	rt, err := handler.Setup(cfg, func(k string) string { return env[k] }, &syncBuffer{})
	require.NoError(t, err)
	sweep := handler.NewSweep(rt)
	for range 3 {
		_, err := sweep.Handle(ctx, nil)
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, tableScans, "a stack that never ran lean scans no table")
}

package capacity

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	modelOut  = flag.String("out", "", "TestCapacityModel: run the capacity model and write its JSON report here")
	modelRows = flag.Int("rows", 1000000, "TestCapacityModel: the backlog the drains start from")
)

// TestCapacityModel runs the whole capacity model when -out names a file
// (`make bench` does, through cmd/outflow-bench): a million-row backlog
// drained by 1, 4 and 16 partitions and the variations that show what
// limits them, and the shards each staging rate needs. It is skipped
// otherwise: it takes minutes of CPU.
func TestCapacityModel(t *testing.T) {
	if *modelOut == "" {
		t.Skip("runs when asked: go test ./internal/capacity -run TestCapacityModel -args -out FILE")
	}
	rates := []float64{100, 500, 1000, 5000, 10000}
	rep, err := Model(*modelRows, rates, 20*time.Second, 0.7,
		func(jobs []func()) {
			t.Run("jobs", func(t *testing.T) {
				for i, job := range jobs {
					t.Run(strconv.Itoa(i), func(t *testing.T) {
						t.Parallel()
						synctest.Test(t, func(*testing.T) { job() })
					})
				}
			})
		},
		func(format string, args ...any) { fmt.Fprintf(os.Stderr, "capacity: "+format+"\n", args...) })
	require.NoError(t, err)
	b, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(*modelOut, b, 0o644))
}

package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRenderOperators_TabulatesEachRunAndSaysWhenBelowTheAimedSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		dead      int
		wantBelow bool
	}{
		{"below 100,000", 10_000, true},
		{"at 100,000", 100_000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			md := RenderOperators(Operators{DeadLetters: tt.dead, Shards: 4, ItemBytes: 310, Seed: 26 * time.Second, Runs: []OperatorRun{
				{Args: []string{"stats"}, DeadLetters: tt.dead, Requests: map[string]int{"DynamoDB.Query": 14, "DynamoDB.GetItem": 1}, Wall: 2 * time.Second, PeakRSS: 32_200_000},
				{Args: []string{"dead", "redrive", "--all"}, DeadLetters: tt.dead, Requests: map[string]int{"DynamoDB.Scan": 2, "DynamoDB.UpdateItem": tt.dead}, Wall: 100 * time.Second, PeakRSS: 33_700_000},
			}})
			require.Contains(t, md, "| `outflow stats` | "+thousands(tt.dead)+" | 15 | GetItem 1, Query 14 | 2s | 32.2 MB |")
			require.Contains(t, md, "| `outflow dead redrive --all` | "+thousands(tt.dead)+" | "+thousands(tt.dead+2)+" | Scan 2, UpdateItem "+thousands(tt.dead)+" |")
			if tt.wantBelow {
				require.Contains(t, md, "not the 100,000 aimed at: moto redrove 100 dead letters a second")
				require.Contains(t, md, "about 17 minutes")
			} else {
				require.NotContains(t, md, "aimed at")
			}
		})
	}
}

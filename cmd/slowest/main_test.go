package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPass_EchoesTheOutputAndRanksTheSlowest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		in         string
		wantOut    []string
		wantFailed bool
		wantCount  string
	}{
		{
			name: "a passing run",
			in: `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":3}
{"Action":"pass","Package":"p","Test":"TestB/sub","Elapsed":2.9}
{"Action":"output","Package":"p","Output":"ok  \tp\t3.5s\n"}
{"Action":"pass","Package":"p","Elapsed":3.5}`,
			wantOut:   []string{"=== RUN   TestA\n", "ok  \tp\t3.5s\n", "slowest tests:\n       3.0s  p TestB\n       0.5s  p TestA\n", "slowest packages:\n       3.5s  p\n"},
			wantCount: "tests: 3 passed, 0 failed",
		},
		{
			name: "a build failure and a failed test",
			in: `# q
q/x.go:1:1: expected 'package'
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":1}
{"Action":"fail","Package":"p","Elapsed":1}`,
			wantOut:    []string{"# q\nq/x.go:1:1: expected 'package'\n"},
			wantFailed: true,
			wantCount:  "tests: 0 passed, 1 failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			s, err := pass(strings.NewReader(tt.in), &out)
			require.NoError(t, err)
			s.report(&out, 10)
			for _, want := range tt.wantOut {
				require.Contains(t, out.String(), want)
			}
			require.Equal(t, tt.wantFailed, s.anyFailed)
			require.True(t, strings.HasSuffix(out.String(), tt.wantCount+"\n"), out.String())
		})
	}
}

package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDuration_TakesDaysBeforeGoUnits(t *testing.T) {
	t.Parallel()
	ok := map[string]time.Duration{
		"7d":      7 * day,
		"1d12h":   36 * time.Hour,
		"1.5d":    36 * time.Hour,
		"0d":      0,
		"0":       0,
		"90s":     90 * time.Second,
		"2h30m":   150 * time.Minute,
		"-2d":     -2 * day,
		"+1d1ms":  day + time.Millisecond,
		"30d":     720 * time.Hour,
		"100000d": 100000 * day,
	}
	for in, want := range ok {
		got, err := parseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "d", "7", "7x", "12h1d", "1d2d", "1d-2h", "--1d", "1e3d", "NaNd", "Infd", "0x10d", "999999999d", "1d 2h"} {
		_, err := parseDuration(in)
		require.Error(t, err, in)
	}
}

func TestDurationFlag_PrintsWhatItReads(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, 2 * time.Second, 7 * day, 36 * time.Hour, -day} {
		s := durationFlag{&d}.String()
		got, err := parseDuration(s)
		require.NoError(t, err, s)
		require.Equal(t, d, got, s)
	}
}

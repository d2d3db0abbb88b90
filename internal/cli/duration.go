package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// day is the unit "d" of a duration flag: 24 hours.
const day = 24 * time.Hour

// durationFlag is every duration flag's type: Go's durations ("90s",
// "15m", "36h") and days before them ("7d", "1d12h", "1.5d").
type durationFlag struct{ d *time.Duration }

// durationVar adds a duration flag to f, as f.DurationVar does, that also
// takes days.
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var(durationFlag{p}, name, usage)
}

func (v durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// Type names the flag's value in the help.
func (durationFlag) Type() string { return "duration" }

// String writes the value as parseDuration reads it: whole days as days,
// zero as "0" (so the help shows no default for it).
func (v durationFlag) String() string {
	switch d := *v.d; {
	case d == 0:
		return "0"
	case d%day == 0:
		return strconv.FormatInt(int64(d/day), 10) + "d"
	default:
		return d.String()
	}
}

// parseDuration reads a Go duration with an optional number of days
// first: "7d", "1d12h", "-2d", "1.5d", "90m".
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid duration %q: want a number and unit, e.g. 90s, 15m, 12h, 7d or 1d12h", s)
	rest, sign := s, time.Duration(1)
	if r, ok := strings.CutPrefix(rest, "-"); ok {
		rest, sign = r, -1
	} else {
		rest = strings.TrimPrefix(rest, "+")
	}
	var days time.Duration
	if n, after, ok := strings.Cut(rest, "d"); ok {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || f < 0 || f*float64(day) >= math.MaxInt64 || strings.ContainsAny(n, "eEpPxXnN_") {
			return 0, bad
		}
		days, rest = time.Duration(f*float64(day)), after
		if rest == "" {
			return sign * days, nil
		}
	}
	if rest == "" || rest[0] == '-' || rest[0] == '+' {
		return 0, bad
	}
	d, err := time.ParseDuration(rest)
	if err != nil || d > math.MaxInt64-days {
		return 0, bad
	}
	return sign * (days + d), nil
}

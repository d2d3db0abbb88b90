// Command slowest reads `go test -json` on its standard input, writes the
// tests' output as go test would have printed it, and ends with the ten
// slowest tests and packages, so a creeping suite is seen before it meets
// CI's time limit, and a closing count of the tests passed and failed. It
// exits 1 if any test or package failed.
//
//	go test -json ./... | go run ./cmd/slowest
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of go test -json (test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is how long one test or package took.
type timing struct {
	name    string
	elapsed time.Duration
}

// summary is what the run came to.
type summary struct {
	tests, packages []timing
	passed, failed  int
	anyFailed       bool
}

func main() {
	s, err := pass(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		os.Exit(1)
	}
	s.report(os.Stdout, 10)
	if s.anyFailed {
		os.Exit(1)
	}
}

// pass copies each event's output from in to out and tallies the run.
// A line that is not an event (a build error go test printed as it is)
// is copied as it is.
func pass(in io.Reader, out io.Writer) (summary, error) {
	var s summary
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, sc.Text())
			continue
		}
		if e.Action == "output" {
			fmt.Fprint(out, e.Output)
			continue
		}
		if e.Action != "pass" && e.Action != "fail" {
			continue
		}
		failed := e.Action == "fail"
		s.anyFailed = s.anyFailed || failed
		d := time.Duration(e.Elapsed * float64(time.Second))
		switch {
		case e.Test == "":
			s.packages = append(s.packages, timing{e.Package, d})
		default:
			if failed {
				s.failed++
			} else {
				s.passed++
			}
			if !strings.Contains(e.Test, "/") {
				s.tests = append(s.tests, timing{e.Package + " " + e.Test, d})
			}
		}
	}
	return s, sc.Err()
}

// report writes the n slowest tests and packages, then the count.
func (s summary) report(out io.Writer, n int) {
	for _, part := range []struct {
		title string
		list  []timing
	}{{"slowest tests", s.tests}, {"slowest packages", s.packages}} {
		list := slices.SortedStableFunc(slices.Values(part.list), func(a, b timing) int { return cmp.Compare(b.elapsed, a.elapsed) })
		fmt.Fprintf(out, "\n%s:\n", part.title)
		for _, t := range list[:min(n, len(list))] {
			fmt.Fprintf(out, "  %8.1fs  %s\n", t.elapsed.Seconds(), t.name)
		}
	}
	fmt.Fprintf(out, "\ntests: %d passed, %d failed\n", s.passed, s.failed)
}

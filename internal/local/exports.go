package local

import (
	"regexp"
	"strings"
)

// exported names the settings a process of your own needs to reach the
// local stack as the functions do, in the order they are printed.
var exported = []string{
	"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	"OUTFLOW_TABLE", "OUTFLOW_ROUTES", "OUTFLOW_ORDERED", "OUTFLOW_SHARDS",
}

// Exports are the shell lines, `export NAME=value`, that give a process of
// your own (a producer, the outflow CLI) what the sweep function runs
// with: the endpoint, the region (for the SDKs that read either variable)
// and the test credentials the moto server
// takes, and the table, routes, ordered routes and shards. Without them an
// SDK off AWS looks for credentials in EC2's metadata and fails.
func (r *Runner) Exports() []string {
	env := r.Stack.Env["SweepFunction"]
	lines := make([]string, 0, len(exported)+1)
	for _, name := range exported {
		lines = append(lines, "export "+name+"="+shellQuote(env[name]))
		if name == "AWS_REGION" {
			// boto3 reads AWS_DEFAULT_REGION, not AWS_REGION.
			lines = append(lines, "export AWS_DEFAULT_REGION="+shellQuote(env[name]))
		}
	}
	return lines
}

// plainWord is a value a POSIX shell reads as it is.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote is s as one shell word: as it is when nothing in it is
// special, else in single quotes (a route's ?source=...&detail-type=...
// has both).
func shellQuote(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

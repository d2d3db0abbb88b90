package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// groupCommand makes cmd, a command that only holds subcommands, refuse
// an unknown one as bad usage (exit 2) with cobra's suggestion, where
// cobra would print the help and exit 0; given nothing, it prints the
// help.
func groupCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	// cobra sets its default distance on the root alone.
	cmd.SuggestionsMinimumDistance = suggestionDistance
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommand(cmd, args[0])
	}
	return cmd
}

// unknownCommand is the usage error for typed, which is none of cmd's
// subcommands, on one line: unknown command "stat"; did you mean "stats"?
func unknownCommand(cmd *cobra.Command, typed string) error {
	msg := fmt.Sprintf("unknown command %q", typed)
	if cmd.HasParent() {
		msg += fmt.Sprintf(" for %q", cmd.CommandPath())
	}
	return usagef("%s%s", msg, didYouMean(cmd.SuggestionsFor(typed), ""))
}

// flagError makes a flag parsing error a usage error, suggesting the
// nearest of cmd's flags for an unknown one.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		msg = fmt.Sprintf("unknown flag --%s for %q%s", name, cmd.CommandPath(), didYouMean(flagSuggestions(cmd, name), "--"))
	}
	return usageError{errors.New(msg)}
}

// didYouMean is `; did you mean "x"?` for suggestions, each with prefix, or
// "" for none.
func didYouMean(suggestions []string, prefix string) string {
	if len(suggestions) == 0 {
		return ""
	}
	quoted := make([]string, len(suggestions))
	for i, s := range suggestions {
		quoted[i] = fmt.Sprintf("%q", prefix+s)
	}
	return "; did you mean " + strings.Join(quoted, " or ") + "?"
}

// suggestionDistance is cobra's default: a name within this many edits
// of what was typed is suggested.
const suggestionDistance = 2

// flagSuggestions are cmd's flags within cobra's suggestion distance of
// typed, or that it is a prefix of, as cobra suggests commands.
func flagSuggestions(cmd *cobra.Command, typed string) []string {
	typed = strings.ToLower(typed)
	var out []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if editDistance(typed, f.Name) <= suggestionDistance || strings.HasPrefix(f.Name, typed) {
			out = append(out, f.Name)
		}
	})
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

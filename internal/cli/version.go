package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/version"
)

// versionJSON is `outflow version --output json`.
type versionJSON struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go,omitempty"`
}

// versionCommand prints the release version, and the commit the binary
// was built from where Go stamped it: what a bug report needs, and what
// `outflow config` compares with the dispatcher's published version.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the Outflow version, and the commit and time it was built from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b := version.Read()
			return a.emit(versionJSON{Version: b.Version, Commit: b.Commit, Time: b.Time, Modified: b.Modified, Go: b.Go},
				func(w io.Writer) { fmt.Fprintf(w, "outflow %s\n", b) })
		},
	}
}

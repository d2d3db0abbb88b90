package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Invocation is how a person runs this same outflow again from their
// shell, for the commands the local stack suggests: "go run ./cmd/outflow"
// when this process is a binary go run or go test built (make run runs it
// so, from the repository root), "outflow" when the PATH finds this very
// binary, and its absolute path otherwise (a release archive unpacked
// anywhere).
func Invocation() string {
	self, err := os.Executable()
	if err != nil {
		return "outflow"
	}
	self, _ = filepath.EvalSymlinks(self)
	if strings.Contains(self, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/outflow"
	}
	if found, err := exec.LookPath("outflow"); err == nil {
		if found, err = filepath.EvalSymlinks(found); err == nil && found == self {
			return "outflow"
		}
	}
	return self
}

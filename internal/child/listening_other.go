//go:build !linux

package child

import (
	"errors"
	"runtime"
)

// Listening reports whether process pid itself holds a socket listening
// on loopback TCP port port. It reads /proc, so it answers on Linux
// only: the Lambda Runtime Interface Emulator, its one user, runs on
// Linux only too.
func Listening(pid int, port string) (bool, error) {
	return false, errors.New("child: telling which process listens on a port needs Linux's /proc, not " + runtime.GOOS)
}

//go:build unix && !linux

package child

import "syscall"

// procAttr starts a child in a process group of its own, which Stop
// signals whole. Only Linux kills a child when its parent dies
// (Pdeathsig); elsewhere a parent that is killed outright leaves it
// running, and Stop is the way it ends.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

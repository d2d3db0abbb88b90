//go:build unix

package child

import "syscall"

// terminate asks the child's whole process group to stop.
func (p *Process) terminate() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM) }

// kill ends the child's whole process group.
func (p *Process) kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

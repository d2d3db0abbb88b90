package child

import "syscall"

// procAttr is nil on Windows: no process groups or parent-death signal
// as on Unix; Stop ends the child itself.
func procAttr() *syscall.SysProcAttr { return nil }

// terminate ends the child: Windows has no SIGTERM to send a process, so
// it is killed at once.
func (p *Process) terminate() { _ = p.cmd.Process.Kill() }

// kill ends the child.
func (p *Process) kill() { _ = p.cmd.Process.Kill() }

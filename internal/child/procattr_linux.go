package child

import "syscall"

// procAttr starts a child in a process group of its own, which Stop
// signals whole, and has the kernel kill it if this process dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

package child

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listening reports whether process pid itself holds a socket listening
// on loopback TCP port port: a dial that connects only says that some
// process listens there. A child given a port found free (FreePort) may
// have lost it to another process, and a ready check that dials it would
// then take the other process's answer for the child's.
func Listening(pid int, port string) (bool, error) {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false, fmt.Errorf("port %q: %w", port, err)
	}
	inodes, err := listeningInodes(fmt.Sprintf(":%04X", n))
	if err != nil || len(inodes) == 0 {
		return false, err
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue // closed since the listing
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listeningInodes returns the inodes of the IPv4 TCP sockets in the LISTEN
// state (0A) whose local address ends in suffix (":PORT", in hex), from
// /proc/net/tcp.
func listeningInodes(suffix string) (map[string]bool, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, fmt.Errorf("open /proc/net/tcp: %w", err)
	}
	defer f.Close()
	inodes := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && strings.HasSuffix(fields[1], suffix) && fields[3] == "0A" {
			inodes[fields[9]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /proc/net/tcp: %w", err)
	}
	return inodes, nil
}

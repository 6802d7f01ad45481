package countingtarget

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// socketOwner returns which of pids holds the TCP socket from remote (the
// sender's end) to local (ours), by its inode in /proc/net/tcp and the
// processes' fd tables; 0 when none does (the sender exited, or is not
// among pids).
func socketOwner(remote, local *net.TCPAddr, pids []int) int {
	inode := tcpInode(remote, local)
	if inode == "" {
		return 0
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == want {
				return pid
			}
		}
	}
	return 0
}

// tcpInode finds the inode of the IPv4 socket whose local end is from and
// whose remote end is to.
func tcpInode(from, to *net.TCPAddr) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	wantL, wantR := procAddr(from), procAddr(to)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && fs[1] == wantL && fs[2] == wantR {
			return fs[9]
		}
	}
	return ""
}

// procAddr is an IPv4 address as /proc/net/tcp writes it: the address as a
// little-endian hex word, the port big-endian.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}

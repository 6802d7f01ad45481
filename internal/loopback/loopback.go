// Package loopback tells whether an address stays on this machine. The
// control plane (plaintext TCP only on loopback), latch-mcp (no tokens only
// on loopback) and the MCP front (loopback browser origins) share it.
package loopback

import "net"

// Host reports whether host is "localhost" or a loopback IP.
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostPort reports whether a host:port address names a loopback host. An
// empty host (":7411", every interface) is not loopback.
func HostPort(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	return err == nil && Host(host)
}

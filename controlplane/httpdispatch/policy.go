package httpdispatch

import (
	"net/netip"
	"syscall"

	"github.com/latchhq/latch/internal/egress"
)

// CheckAddr reports whether the dispatcher may connect to ip. It is
// egress.CheckAddr, the one address policy of Latch's outbound HTTP; see
// there for what is refused. The error wraps ErrRefused.
func CheckAddr(ip netip.Addr, allowPrivate bool) error {
	return egress.CheckAddr(ip, allowPrivate)
}

// dialControl returns the net.Dialer Control function applying CheckAddr to
// the resolved address of every connection attempt (egress.Policy.Control).
func dialControl(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return egress.Policy{AllowPrivate: allowPrivate}.Control
}

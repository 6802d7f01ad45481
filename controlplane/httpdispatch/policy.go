package httpdispatch

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
)

// metadataAddrs are cloud instance-metadata and platform endpoints. They are
// refused even when a target allows private addresses: a credential-holding
// gateway must never be turned into a metadata fetcher.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OCI, DigitalOcean, OpenStack
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IPv6 IMDS
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer (a public address, platform-only)
}

var (
	thisNetwork  = netip.MustParsePrefix("0.0.0.0/8")     // "this host on this network"
	sharedSpace  = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598 carrier-grade NAT
	siteLocal    = netip.MustParsePrefix("fec0::/10")     // deprecated IPv6 site-local
	nat64        = netip.MustParsePrefix("64:ff9b::/96")  // RFC 6052 well-known NAT64 prefix
	limitedBcast = netip.MustParseAddr("255.255.255.255") // limited broadcast
)

// CheckAddr reports whether the dispatcher may connect to ip.
//
// Always refused: cloud metadata endpoints, unspecified (0.0.0.0/8, ::),
// link-local (169.254.0.0/16, fe80::/10), multicast and broadcast
// addresses. Refused unless allowPrivate: loopback, RFC 1918, RFC 6598,
// IPv6 unique-local (fc00::/7) and site-local addresses. IPv4-mapped IPv6
// addresses and the NAT64 well-known prefix are judged by the IPv4 address
// they carry. The error wraps ErrRefused.
func CheckAddr(ip netip.Addr, allowPrivate bool) error {
	ip = ip.WithZone("").Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		if err := CheckAddr(netip.AddrFrom4([4]byte(b[12:16])), allowPrivate); err != nil {
			return err
		}
	}
	var what string
	private := false
	switch {
	case !ip.IsValid():
		what = "not an IP address"
	case slices.Contains(metadataAddrs, ip):
		what = "a cloud metadata endpoint"
	case ip.IsUnspecified() || thisNetwork.Contains(ip):
		what = "an unspecified address"
	case ip.IsLinkLocalUnicast():
		what = "a link-local address"
	case ip.IsMulticast() || ip == limitedBcast:
		what = "a multicast or broadcast address"
	case ip.IsLoopback():
		what, private = "a loopback address", true
	case ip.IsPrivate() || sharedSpace.Contains(ip) || siteLocal.Contains(ip):
		what, private = "a private address", true
	default:
		return nil
	}
	if !private {
		return fmt.Errorf("%w: %s is %s, which is never dialed", ErrRefused, ip, what)
	}
	if allowPrivate {
		return nil
	}
	return fmt.Errorf("%w: %s is %s; set allow_private on the target if it is meant to be reached", ErrRefused, ip, what)
}

// dialControl returns a net.Dialer Control function that applies CheckAddr
// to the resolved address of every connection attempt. It runs after name
// resolution and before connect(2), so a name that resolves (or re-resolves,
// as in DNS rebinding) to a refused address never gets a packet sent to it.
func dialControl(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if network != "tcp4" && network != "tcp6" {
			return fmt.Errorf("%w: network %q is not TCP", ErrRefused, network)
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: dial address %q is not an IP and port", ErrRefused, address)
		}
		return CheckAddr(ap.Addr(), allowPrivate)
	}
}

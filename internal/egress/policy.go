package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
)

var (
	// ErrRefused means the address policy refused a destination address.
	// Nothing was sent to it.
	ErrRefused = errors.New("egress: address refused by policy")
	// ErrRedirect means a redirect was not followed (see the package
	// documentation for the rule).
	ErrRedirect = errors.New("egress: redirect not followed")
	// ErrCrossOrigin means a request to an origin other than the one a
	// credential is for was refused before it was sent.
	ErrCrossOrigin = errors.New("egress: credential refused for another origin")
)

// metadataAddrs are cloud instance-metadata and platform endpoints. They are
// refused even when private addresses are allowed: a credential-holding
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

// DefaultHint is the advice a refusal of a private address gives when the
// Policy names none.
const DefaultHint = "set allow_private on the target if it is meant to be reached"

// Policy decides which resolved addresses may be dialed.
type Policy struct {
	// AllowPrivate permits loopback, RFC 1918, RFC 6598, IPv6 unique-local
	// and site-local addresses.
	AllowPrivate bool
	// AllowLoopback permits loopback addresses only (127.0.0.0/8, ::1): a
	// local development issuer or token server, without opening the
	// private networks.
	AllowLoopback bool
	// Hint tells the operator how to permit a refused private address
	// (default DefaultHint).
	Hint string
}

// CheckAddr reports whether ip may be dialed under Policy{AllowPrivate:
// allowPrivate}.
//
// Always refused: cloud metadata endpoints, unspecified (0.0.0.0/8, ::),
// link-local (169.254.0.0/16, fe80::/10), multicast and broadcast
// addresses. Refused unless allowPrivate: loopback, RFC 1918, RFC 6598,
// IPv6 unique-local (fc00::/7) and site-local addresses. IPv4-mapped IPv6
// addresses and the NAT64 well-known prefix are judged by the IPv4 address
// they carry. The error wraps ErrRefused.
func CheckAddr(ip netip.Addr, allowPrivate bool) error {
	return Policy{AllowPrivate: allowPrivate}.Check(ip)
}

// Check reports whether ip may be dialed; see CheckAddr. The error wraps
// ErrRefused.
func (p Policy) Check(ip netip.Addr) error {
	ip = ip.WithZone("").Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		if err := p.Check(netip.AddrFrom4([4]byte(b[12:16]))); err != nil {
			return err
		}
	}
	var what string
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
		if p.AllowPrivate || p.AllowLoopback {
			return nil
		}
		return p.refusePrivate(ip, "a loopback address")
	case ip.IsPrivate() || sharedSpace.Contains(ip) || siteLocal.Contains(ip):
		if p.AllowPrivate {
			return nil
		}
		return p.refusePrivate(ip, "a private address")
	default:
		return nil
	}
	return fmt.Errorf("%w: %s is %s, which is never dialed", ErrRefused, ip, what)
}

func (p Policy) refusePrivate(ip netip.Addr, what string) error {
	hint := p.Hint
	if hint == "" {
		hint = DefaultHint
	}
	return fmt.Errorf("%w: %s is %s; %s", ErrRefused, ip, what, hint)
}

// Control is a net.Dialer Control function applying the policy to the
// resolved address of every connection attempt. It runs after name
// resolution and before connect(2), so a name that resolves (or re-resolves,
// as in DNS rebinding) to a refused address never gets a packet sent to it.
// Only TCP is dialed.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("%w: network %q is not TCP", ErrRefused, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: dial address %q is not an IP and port", ErrRefused, address)
	}
	return p.Check(ap.Addr())
}

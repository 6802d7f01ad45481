package httpdispatch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		ip      string
		private bool // allowPrivate
		ok      bool
	}{
		{"169.254.169.254", true, false},
		{"169.254.169.254", false, false},
		{"169.254.170.2", true, false},
		{"169.254.1.1", true, false},
		{"fe80::1", true, false},
		{"fe80::1%eth0", true, false},
		{"fd00:ec2::254", true, false},
		{"100.100.100.200", true, false},
		{"168.63.129.16", true, false},
		{"::ffff:169.254.169.254", true, false},
		{"64:ff9b::a9fe:a9fe", true, false}, // NAT64 of 169.254.169.254
		{"0.0.0.0", true, false},
		{"0.1.2.3", true, false},
		{"::", true, false},
		{"224.0.0.1", true, false},
		{"255.255.255.255", true, false},
		{"ff02::1", true, false},
		{"127.0.0.1", false, false},
		{"127.0.0.1", true, true},
		{"::1", false, false},
		{"::1", true, true},
		{"10.1.2.3", false, false},
		{"10.1.2.3", true, true},
		{"172.16.0.1", false, false},
		{"192.168.1.1", false, false},
		{"192.168.1.1", true, true},
		{"100.64.0.1", false, false},
		{"fd12::1", false, false},
		{"fd12::1", true, true},
		{"fec0::1", false, false},
		{"::ffff:10.0.0.1", false, false},
		{"64:ff9b::a00:1", false, false}, // NAT64 of 10.0.0.1
		{"8.8.8.8", false, true},
		{"2001:4860:4860::8888", false, true},
		{"64:ff9b::808:808", false, true}, // NAT64 of 8.8.8.8
	}
	for _, tt := range tests {
		err := CheckAddr(netip.MustParseAddr(tt.ip), tt.private)
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddr(%q, %v) = %v, want ok=%v", tt.ip, tt.private, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("CheckAddr(%q, %v) = %v, want ErrRefused", tt.ip, tt.private, err)
		}
	}
}

// TestDialControl calls the dialer's Control function with resolved
// addresses directly, as the dialer does before connect(2).
func TestDialControl(t *testing.T) {
	tests := []struct {
		name, network, address string
		private                bool
		ok                     bool
	}{
		{"metadata v4", "tcp4", "169.254.169.254:80", true, false},
		{"metadata v6", "tcp6", "[fd00:ec2::254]:80", true, false},
		{"link-local v6 with zone", "tcp6", "[fe80::1%lo]:443", true, false},
		{"loopback without allow_private", "tcp4", "127.0.0.1:8080", false, false},
		{"loopback with allow_private", "tcp4", "127.0.0.1:8080", true, true},
		{"private without allow_private", "tcp4", "10.0.0.7:443", false, false},
		{"public", "tcp6", "[2001:db8::1]:443", false, true},
		{"udp", "udp4", "8.8.8.8:53", true, false},
		{"not an address", "tcp4", "example.com:80", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := dialControl(tt.private)(tt.network, tt.address, nil)
			if (err == nil) != tt.ok {
				t.Fatalf("control(%q, %q) = %v, want ok=%v", tt.network, tt.address, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Fatalf("control(%q, %q) = %v, want ErrRefused", tt.network, tt.address, err)
			}
		})
	}
}

// TestSendRefusedAddresses checks that refused addresses never get a
// connection. The control function runs before connect(2), so the
// off-loopback cases send no packet; the loopback case proves it, since the
// server there counts what it receives.
func TestSendRefusedAddresses(t *testing.T) {
	demo, srv := startDemo(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := fakeResolver(t, map[string][]netip.Addr{
		"metadata.latch.test": {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")},
		"rebound.latch.test":  {netip.MustParseAddr("127.0.0.1")},
	})
	d := newDispatcher(t, Config{Resolver: res})
	tests := []struct {
		name    string
		baseURL string
		private bool
	}{
		{"metadata address", "http://169.254.169.254", true},
		{"link-local v6", "http://[fe80::1]:8080", true},
		{"metadata v6", "http://[fd00:ec2::254]", true},
		{"unspecified", "http://0.0.0.0:" + strconv.Itoa(port), true},
		{"private without allow_private", "http://10.255.255.1", false},
		{"loopback without allow_private", "http://127.0.0.1:" + strconv.Itoa(port), false},
		{"name resolving to metadata", "http://metadata.latch.test", true},
		{"name resolving to loopback", "http://rebound.latch.test:" + strconv.Itoa(port), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := demoTarget("http", "x")
			tg.BaseURL, tg.AllowPrivate = tt.baseURL, tt.private
			c := releaseCall(tg, "exec-refused", "1")
			c.Timeout = 5 * time.Second
			obs, err := d.Send(t.Context(), c)
			if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrNotSent) || errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("Send(%s) = %v, %v; want ErrRefused and ErrNotSent", tt.baseURL, obs, err)
			}
		})
	}
	if n := demo.Requests(); n != 0 {
		t.Errorf("demo target received %d requests, want 0", n)
	}

	// The same resolver and name, allowed to reach loopback: the request
	// goes through, so the refusals above came from the policy.
	tg := demoTarget("http", "rebound.latch.test:"+strconv.Itoa(port))
	obs, err := d.Send(t.Context(), releaseCall(tg, "exec-allowed", "1"))
	if err != nil || obs.Status != http.StatusCreated {
		t.Fatalf("Send(rebound, allow_private) = %v, %v; want 201", obs, err)
	}
}

// TestStatusRefused checks Status applies the same policy.
func TestStatusRefused(t *testing.T) {
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", "169.254.169.254")
	_, err := d.Status(context.Background(), Call{ExecutionID: "e1", Target: tg})
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("Status(metadata) = %v, want ErrRefused and ErrNotSent", err)
	}
	if !strings.Contains(err.Error(), "metadata") {
		t.Errorf("Status(metadata) error %q does not say why", err)
	}
}

package httpdispatch

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/latchhq/latch/controlplane/demotarget"
	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/internal/testing/testlog"
	"github.com/latchhq/latch/tools"
)

func newDispatcher(tb testing.TB, cfg Config) *Dispatcher {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(tb, hclog.Trace)
	}
	d, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(d.Close)
	return d
}

// startDemo runs a demo target on loopback.
func startDemo(tb testing.TB) (*demotarget.Server, *httptest.Server) {
	tb.Helper()
	demo := demotarget.New(demotarget.Config{Logger: testlog.New(tb, hclog.Trace)})
	srv := httptest.NewServer(demo)
	tb.Cleanup(srv.Close)
	return demo, srv
}

// demoTarget describes a demo target reached at addr ("host:port").
func demoTarget(scheme, addr string) *tools.Target {
	return &tools.Target{
		Name:    "demo",
		Channel: tools.ChannelHTTP,
		HTTPTarget: tools.HTTPTarget{
			BaseURL:           scheme + "://" + addr,
			IdempotencyHeader: "Idempotency-Key",
			Status:            &tools.StatusQuery{Method: http.MethodGet, Path: "/v1/releases/by-key/{execution_id}"},
			AllowPrivate:      true,
		},
	}
}

func releaseCall(tg *tools.Target, id, version string) Call {
	return Call{
		ExecutionID: id,
		Target:      tg,
		Method:      http.MethodPost,
		Path:        "/v1/releases",
		Body:        []byte(`{"service":"api","version":"` + version + `","region":"eu-west-1"}`),
	}
}

// waitFor polls cond, bounded (testbin.Eventually).
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testbin.Eventually(tb, what, cond)
}

// recorded is what a recording server saw of one request.
type recorded struct {
	method, uri string
	header      http.Header
	body        []byte
	te          []string
	length      int64
}

// startRecorder runs a loopback server that records requests and answers
// with respond.
func startRecorder(tb testing.TB, respond http.HandlerFunc) (*httptest.Server, func() []recorded) {
	tb.Helper()
	var mu sync.Mutex
	var seen []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, recorded{r.Method, r.RequestURI, r.Header.Clone(), b, r.TransferEncoding, r.ContentLength})
		mu.Unlock()
		if respond != nil {
			respond(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(srv.Close)
	return srv, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), seen...)
	}
}

// fakeResolver answers A and AAAA queries from hosts over an in-memory
// stream, so tests resolve names without touching the network.
func fakeResolver(tb testing.TB, hosts map[string][]netip.Addr) *net.Resolver {
	tb.Helper()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			client, server := net.Pipe()
			go serveDNS(server, hosts)
			return client, nil
		},
	}
}

func serveDNS(c net.Conn, hosts map[string][]netip.Addr) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for range 16 {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		var q dnsmessage.Message
		if err := q.Unpack(msg); err != nil || len(q.Questions) != 1 {
			return
		}
		qn := q.Questions[0]
		r := dnsmessage.Message{
			Header:    dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true, RecursionAvailable: true},
			Questions: q.Questions,
		}
		addrs, ok := hosts[strings.TrimSuffix(qn.Name.String(), ".")]
		if !ok {
			r.RCode = dnsmessage.RCodeNameError
		}
		for _, a := range addrs {
			rh := dnsmessage.ResourceHeader{Name: qn.Name, Type: qn.Type, Class: dnsmessage.ClassINET, TTL: 60}
			switch {
			case qn.Type == dnsmessage.TypeA && a.Is4():
				r.Answers = append(r.Answers, dnsmessage.Resource{Header: rh, Body: &dnsmessage.AResource{A: a.As4()}})
			case qn.Type == dnsmessage.TypeAAAA && a.Is6():
				r.Answers = append(r.Answers, dnsmessage.Resource{Header: rh, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
			}
		}
		b, err := r.Pack()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(l[:], uint16(len(b)))
		if _, err := c.Write(append(l[:], b...)); err != nil {
			return
		}
	}
}

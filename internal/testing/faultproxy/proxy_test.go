package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lineBackend answers every line it reads with "ok: <line>" and records
// what it received.
type lineBackend struct {
	ln   net.Listener
	mu   sync.Mutex
	got  []string
	wg   sync.WaitGroup
	done chan struct{}
}

func startBackend(tb testing.TB) *lineBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &lineBackend{ln: ln, done: make(chan struct{})}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					b.mu.Lock()
					if line != "" {
						b.got = append(b.got, line)
					}
					b.mu.Unlock()
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, "ok: "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		b.wg.Wait()
	})
	return b
}

func (b *lineBackend) received() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

func startProxy(tb testing.TB, backend string) *Proxy {
	tb.Helper()
	p, err := Start(backend)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// startPair starts a line backend and a proxy in front of it.
func startPair(tb testing.TB) (*lineBackend, *Proxy) {
	tb.Helper()
	b := startBackend(tb)
	return b, startProxy(tb, b.ln.Addr().String())
}

// setMode sets p's mode, failing tb if it cannot.
func setMode(tb testing.TB, p *Proxy, m Mode) {
	tb.Helper()
	if err := p.SetMode(m); err != nil {
		tb.Fatalf("SetMode(%+v): %v", m, err)
	}
}

func dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	tb.Cleanup(func() { c.Close() })
	return c
}

// exchange writes line and returns everything read until EOF or the first
// answer line.
func exchange(c net.Conn, line string) (string, error) {
	if _, err := io.WriteString(c, line); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestPass(t *testing.T) {
	_, p := startPair(t)
	c := dial(t, p.Addr())
	for _, line := range []string{"one\n", "two\n"} {
		got, err := exchange(c, line)
		if err != nil || got != "ok: "+line {
			t.Fatalf("exchange(%q) = %q, %v; want the backend's answer", line, got, err)
		}
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns() = %d, want 1", n)
	}
}

func TestCutAfterRequest(t *testing.T) {
	b, p := startPair(t)
	c := dial(t, p.Addr())
	if _, err := exchange(c, "warm\n"); err != nil {
		t.Fatal(err)
	}
	// Applies to the existing connection.
	setMode(t, p, Cut(0))
	got, err := exchange(c, "deploy\n")
	if got != "" || err == nil {
		t.Fatalf("exchange through a cut = %q, %v; want no answer and an error", got, err)
	}
	waitFor(t, func() bool { return len(b.received()) == 2 })
	if r := b.received(); r[1] != "deploy\n" {
		t.Fatalf("backend received %q, want the whole request", r)
	}
}

func TestCutAfterBytes(t *testing.T) {
	b, p := startPair(t)
	setMode(t, p, Cut(3))
	c := dial(t, p.Addr())
	if got, err := exchange(c, "abcdef\n"); got != "" || err == nil {
		t.Fatalf("exchange = %q, %v; want no answer and an error", got, err)
	}
	waitFor(t, func() bool { return len(b.received()) == 1 })
	if r := b.received(); r[0] != "abc" {
		t.Fatalf("backend received %q, want the first 3 bytes", r)
	}
}

func TestRefuseAndDrop(t *testing.T) {
	b, p := startPair(t)

	setMode(t, p, Refuse)
	_, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing = %v, want connection refused", err)
	}

	setMode(t, p, Drop)
	c := dial(t, p.Addr())
	buf := make([]byte, 1)
	if n, err := c.Read(buf); n != 0 || err == nil {
		t.Fatalf("read on a dropped connection = %d, %v; want an immediate close", n, err)
	}

	setMode(t, p, Pass)
	c = dial(t, p.Addr())
	if got, err := exchange(c, "again\n"); err != nil || got != "ok: again\n" {
		t.Fatalf("exchange after Pass = %q, %v", got, err)
	}
	if r := b.received(); len(r) != 1 {
		t.Fatalf("backend received %q, want only the request sent in Pass mode", r)
	}
	if n := p.Conns(); n != 2 {
		t.Fatalf("Conns() = %d, want 2 (refused dials are not accepted)", n)
	}
}

func TestClose(t *testing.T) {
	_, p := startPair(t)
	c := dial(t, p.Addr())
	if _, err := exchange(c, "x\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := exchange(c, "y\n"); err == nil {
		t.Fatal("exchange after Close succeeded")
	}
	if err := p.SetMode(Pass); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetMode after Close = %v, want ErrClosed", err)
	}
}

func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// silent reports whether c stays silent for d (nothing to read, not closed).
func silent(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{}) //nolint:errcheck // best effort
	buf := make([]byte, 1)
	_, err := c.Read(buf)
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestFreezeHoldsThenThaws(t *testing.T) {
	b, p := startPair(t)
	old := dial(t, p.Addr())
	if _, err := exchange(old, "warm\n"); err != nil {
		t.Fatal(err)
	}
	setMode(t, p, Freeze)
	// An existing connection: the request waits in the proxy.
	if _, err := io.WriteString(old, "held\n"); err != nil {
		t.Fatal(err)
	}
	// A new connection is accepted and carries nothing.
	fresh := dial(t, p.Addr())
	if _, err := io.WriteString(fresh, "new\n"); err != nil {
		t.Fatal(err)
	}
	if !silent(old, 200*time.Millisecond) || !silent(fresh, 50*time.Millisecond) {
		t.Fatal("a frozen connection answered or closed; want it held open and silent")
	}
	if r := b.received(); len(r) != 1 {
		t.Fatalf("backend received %q while frozen, want only the request sent before", r)
	}
	setMode(t, p, Pass)
	for name, c := range map[string]net.Conn{"held": old, "new": fresh} {
		got, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || got != "ok: "+name+"\n" {
			t.Errorf("after thaw, the %s connection read %q, %v; want the backend's answer to what waited", name, got, err)
		}
	}
}

func TestFreezeThenCutAll(t *testing.T) {
	b, p := startPair(t)
	old := dial(t, p.Addr())
	if _, err := exchange(old, "warm\n"); err != nil {
		t.Fatal(err)
	}
	setMode(t, p, Freeze)
	fresh := dial(t, p.Addr())
	if _, err := io.WriteString(old, "held\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return p.Conns() == 2 })
	if n := p.CutAll(); n != 3 {
		t.Errorf("CutAll() = %d, want 3 (both ends of the old link, the client end of the new one)", n)
	}
	for name, c := range map[string]net.Conn{"old": old, "new": fresh} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("read on the cut %s connection = %d, %v; want it closed", name, n, err)
		}
	}
	if r := b.received(); len(r) != 1 {
		t.Fatalf("backend received %q, want nothing sent while frozen", r)
	}
	// Still frozen: a new connection is held again; Close releases it.
	again := dial(t, p.Addr())
	if !silent(again, 50*time.Millisecond) {
		t.Fatal("a connection after CutAll in Freeze was not held")
	}
}

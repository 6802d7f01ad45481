// Package faultproxy is a TCP proxy for fault tests: it listens on
// 127.0.0.1, forwards to one backend, and injects connection faults that a
// test switches at run time. Modes apply to new and existing connections
// alike, from the next chunk of data each direction carries. Only tests
// import this package; it lives under controlplane/internal so that no
// package outside controlplane can, and the binaries' deps tests keep it out
// of every binary.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrClosed is returned by SetMode after Close.
var ErrClosed = errors.New("faultproxy: closed")

type kind int

const (
	kindPass kind = iota
	kindRefuse
	kindDrop
	kindCut
	kindFreeze
)

// Mode is what the proxy does with traffic.
type Mode struct {
	kind  kind
	bytes int64
}

var (
	// Pass forwards everything both ways.
	Pass = Mode{}
	// Refuse stops listening: new connections are refused by the kernel
	// (the client's dial fails; nothing is written). Existing connections
	// are closed at their next chunk of data without forwarding it.
	Refuse = Mode{kind: kindRefuse}
	// Drop accepts connections and closes them at once, before reading or
	// forwarding a byte. Existing connections are closed at their next
	// chunk of data without forwarding it.
	Drop = Mode{kind: kindDrop}
	// Freeze stops forwarding and holds every connection open: a chunk
	// either side sends waits in the proxy, unforwarded, and new
	// connections are accepted (the client's dial succeeds) but carry
	// nothing. To both ends the peer looks alive and silent, like a
	// partitioned network or a stalled database host. Leaving Freeze
	// forwards what waited under the new mode; CutAll ends the held
	// connections instead.
	Freeze = Mode{kind: kindFreeze}
)

// Cut forwards the client's bytes to the backend, at most n of them since
// the mode was set (n <= 0: no limit), and never returns a response byte:
// when the backend starts answering, or when n bytes have been forwarded,
// both sides are closed. With n <= 0 the backend receives the whole request
// and acts on it, and the client gets no answer.
func Cut(n int64) Mode { return Mode{kind: kindCut, bytes: n} }

func (m Mode) String() string {
	switch m.kind {
	case kindRefuse:
		return "refuse"
	case kindDrop:
		return "drop"
	case kindCut:
		return fmt.Sprintf("cut(%d)", m.bytes)
	case kindFreeze:
		return "freeze"
	default:
		return "pass"
	}
}

// Proxy is a running proxy.
type Proxy struct {
	backend string
	addr    string

	mu    sync.Mutex
	ln    net.Listener // nil while refusing
	mode  Mode
	gen   uint64 // incremented by SetMode
	conns int
	open  map[net.Conn]struct{}
	// thaw is closed when the proxy leaves Freeze (or closes); nil when
	// not frozen.
	thaw chan struct{}
	// cut is closed (and replaced) by CutAll, so that connections waiting
	// in Freeze before their backend is dialled end too.
	cut    chan struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 on a free port and forwards to backend
// ("host:port"), in Pass mode.
func Start(backend string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{backend: backend, addr: ln.Addr().String(), ln: ln, open: make(map[net.Conn]struct{}), cut: make(chan struct{})}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr returns the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.addr }

// Conns returns how many connections the proxy has accepted.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

// SetMode switches the mode. Leaving Refuse listens again on the same
// address.
func (p *Proxy) SetMode(m Mode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	switch {
	case m.kind == kindRefuse && p.ln != nil:
		p.ln.Close()
		p.ln = nil
	case m.kind != kindRefuse && p.ln == nil:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
	switch {
	case m.kind == kindFreeze && p.thaw == nil:
		p.thaw = make(chan struct{})
	case m.kind != kindFreeze && p.thaw != nil:
		close(p.thaw)
		p.thaw = nil
	}
	p.mode = m
	p.gen++
	return nil
}

// CutAll closes every connection the proxy holds open, frozen or not (the
// client and the backend each see their connection closed, with nothing of
// a waiting chunk forwarded), and returns how many sockets it closed
// (client and backend ends alike). The mode stays as it is: in Freeze, new
// connections are held again.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.open {
		c.Close()
		n++
	}
	close(p.cut)
	p.cut = make(chan struct{})
	return n
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.open {
		c.Close()
	}
	if p.thaw != nil {
		close(p.thaw)
		p.thaw = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) current() (Mode, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.gen
}

// unfrozen waits while the proxy is in Freeze and returns the mode in force
// after it; it returns false when the proxy closed, CutAll ran or dead was
// closed meanwhile.
func (p *Proxy) unfrozen(dead <-chan struct{}) (Mode, uint64, bool) {
	for {
		p.mu.Lock()
		m, gen, thaw, cut, closed := p.mode, p.gen, p.thaw, p.cut, p.closed
		p.mu.Unlock()
		if closed {
			return m, gen, false
		}
		if m.kind != kindFreeze {
			return m, gen, true
		}
		select {
		case <-thaw:
		case <-cut:
			return m, gen, false
		case <-dead:
			return m, gen, false
		}
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.open[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, c)
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.mu.Lock()
		p.conns++
		p.mu.Unlock()
		if m, _ := p.current(); m.kind == kindDrop {
			c.Close()
			continue
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// link is one proxied connection pair.
type link struct {
	p        *Proxy
	client   net.Conn
	backend  net.Conn
	once     sync.Once
	dead     chan struct{} // closed when either side's pump ends the link
	cutGen   uint64
	cutBytes int64
	mu       sync.Mutex
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.dead)
		l.client.Close()
		l.backend.Close()
	})
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	// A connection accepted in Freeze reaches the backend only once thawed.
	if _, _, ok := p.unfrozen(nil); !ok {
		client.Close()
		return
	}
	backend, err := net.DialTimeout("tcp", p.backend, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(backend) {
		client.Close()
		return
	}
	defer p.untrack(backend)
	l := &link{p: p, client: client, backend: backend, dead: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.pump(client, backend, true)
	}()
	l.pump(backend, client, false)
	<-done
	l.close()
}

// pump copies src to dst chunk by chunk, applying the mode in force. An
// orderly end of src is passed on as a half-close; anything else closes the
// link.
func (l *link) pump(src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk, stop := l.decide(buf[:n], fromClient)
			if len(chunk) > 0 {
				if _, werr := dst.Write(chunk); werr != nil {
					l.close()
					return
				}
			}
			if stop {
				l.close()
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
				return
			}
			l.close()
			return
		}
	}
}

// decide returns the part of chunk to forward and whether to close the link
// after forwarding it.
func (l *link) decide(chunk []byte, fromClient bool) ([]byte, bool) {
	m, gen, ok := l.p.unfrozen(l.dead)
	if !ok {
		return nil, true
	}
	switch m.kind {
	case kindPass:
		return chunk, false
	case kindCut:
		if !fromClient {
			return nil, true // never return a response byte
		}
		if m.bytes <= 0 {
			return chunk, false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cutGen != gen {
			l.cutGen, l.cutBytes = gen, 0
		}
		left := m.bytes - l.cutBytes
		if int64(len(chunk)) >= left {
			l.cutBytes = m.bytes
			return chunk[:left], true
		}
		l.cutBytes += int64(len(chunk))
		return chunk, false
	default: // refuse, drop: forward nothing more
		return nil, true
	}
}

package sshtest_test

import (
	"io"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/latchhq/latch/internal/testing/sshtest"
)

func dial(t *testing.T, srv *sshtest.Server, signer ssh.Signer) *ssh.Client {
	t.Helper()
	hk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(srv.HostKey()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", srv.Addr(), &ssh.ClientConfig{
		User:            "u",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hk),
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStreamLocalHalfClose: the handler passes a client's EOF on to the
// socket and the socket's EOF back, so a request/response exchange that
// ends by half-closing works.
func TestStreamLocalHalfClose(t *testing.T) {
	signer := sshtest.NewSigner(t)
	srv := sshtest.Start(t, sshtest.Options{AuthorizedKey: signer.PublicKey()})
	c := dial(t, srv, signer)
	conn, err := c.Dial("unix", sshtest.EchoSocket(t))
	if err != nil {
		t.Fatalf("Dial(unix): %v", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "ping" {
		t.Fatalf("ReadAll = %q, %v; want %q", got, err, "ping")
	}
}

func TestAuthorizedKeyOnly(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{AuthorizedKey: sshtest.NewSigner(t).PublicKey()})
	hk, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(srv.HostKey()))
	_, err := ssh.Dial("tcp", srv.Addr(), &ssh.ClientConfig{
		User: "u", Auth: []ssh.AuthMethod{ssh.PublicKeys(sshtest.NewSigner(t))},
		HostKeyCallback: ssh.FixedHostKey(hk), Timeout: 10 * time.Second,
	})
	if err == nil {
		t.Fatal("dial with an unauthorized key succeeded")
	}
}

// TestFreezeThaw: a frozen server leaves a request unanswered; after Thaw
// the held request is answered and the connection works again.
func TestFreezeThaw(t *testing.T) {
	signer := sshtest.NewSigner(t)
	srv := sshtest.Start(t, sshtest.Options{AuthorizedKey: signer.PublicKey()})
	c := dial(t, srv, signer)
	srv.Freeze()
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("frozen server answered a request (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	srv.Thaw()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("request after Thaw: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("request not answered after Thaw")
	}
}

func TestDropAll(t *testing.T) {
	signer := sshtest.NewSigner(t)
	srv := sshtest.Start(t, sshtest.Options{AuthorizedKey: signer.PublicKey()})
	c := dial(t, srv, signer)
	srv.DropAll()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("client did not see the drop")
	}
	dial(t, srv, signer) // still serving
	if srv.Accepted() != 2 {
		t.Errorf("Accepted() = %d, want 2", srv.Accepted())
	}
}

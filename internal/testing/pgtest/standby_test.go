package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestPairFailsOver: a row committed on the primary of a synchronous pair
// is on the standby once the primary is SIGKILLed and the standby
// promoted, and the multi-host connection string reaches the new primary.
func TestPairFailsOver(t *testing.T) {
	p := StartPair(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, p.MultiHostDSN())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t (v text); INSERT INTO t VALUES ('acknowledged')"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if rec, err := p.Standby.InRecovery(); err != nil || !rec {
		t.Fatalf("standby InRecovery() = %v, %v; want true", rec, err)
	}

	p.Primary.Kill()
	if !p.Primary.Exited() {
		t.Fatal("the primary is still running after Kill")
	}
	if _, err := pgx.Connect(ctx, p.MultiHostDSN()); err == nil {
		t.Fatal("the multi-host string reached a writable server before the promotion")
	}
	if err := p.Standby.Promote(); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, p.MultiHostDSN())
	if err != nil {
		t.Fatalf("connect after the promotion: %v", err)
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != "acknowledged" {
		t.Fatalf("SELECT on the promoted standby = %q, %v; want the row the primary acknowledged", v, err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES ('after')"); err != nil {
		t.Fatalf("write on the promoted standby: %v", err)
	}
}

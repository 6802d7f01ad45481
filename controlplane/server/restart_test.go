package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// restartStep mirrors engine.step: the execution moves to `to`, the
// journal record carries its snapshot, the record gets the journal index.
func restartStep(tx *store.Tx, x *recordv1.Execution, to recordv1.State) error {
	from := x.GetState()
	x.State = to
	snap := proto.Clone(x).(*recordv1.Execution)
	if to != recordv1.State_STATE_ACCEPTED {
		snap.CanonicalIntent, snap.Arguments, snap.Evidence = nil, nil, nil
	}
	idx, err := tx.Append(&recordv1.JournalEntry{ExecutionId: x.GetId(), Kind: "transition", From: from, To: to, Execution: snap})
	if err != nil {
		return err
	}
	x.JournalIndex = uint64(idx)
	return tx.PutExecution(x, true)
}

// buildRestartStore writes n executions of the state catalog's deploy
// tool into data's store: every unsettledEvery-th is left outcome_unknown
// with its next recovery at due, the others completed with a stored
// result.
func buildRestartStore(tb testing.TB, data string, n, unsettledEvery int, due time.Time) {
	tb.Helper()
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	accepted := timestamppb.New(time.Now().Add(-time.Minute))
	for lo := 0; lo < n; lo += 500 {
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			for i := lo; i < min(lo+500, n); i++ {
				id := fmt.Sprintf("act_%026d", i)
				x := &recordv1.Execution{Id: id, Fingerprint: fmt.Sprintf("hmac-sha256:%064x", i), Actor: "alice", IntentScope: "actor:alice",
					Tool: "deploy", Channel: "http", CanonicalIntent: []byte(`{"v":` + strconv.Itoa(i) + `}`), Arguments: []byte(`{"version":"1"}`),
					Evidence: &recordv1.Evidence{JsonrpcId: strconv.Itoa(i)}, AcceptedAt: accepted}
				tx.Fresh(id)
				for _, s := range []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_DISPATCHED} {
					if err := restartStep(tx, x, s); err != nil {
						return err
					}
				}
				if i%unsettledEvery == 0 {
					x.NextRecoveryAt = timestamppb.New(due)
					if err := restartStep(tx, x, recordv1.State_STATE_OUTCOME_UNKNOWN); err != nil {
						return err
					}
					continue
				}
				sum, err := tx.PutResult(id, &recordv1.Result{Status: 201, Body: []byte(`{"ok":true}`)})
				if err != nil {
					return err
				}
				x.ResultRef, x.ResultSha256, x.Outcome, x.TargetStatus = store.ResultRef(sum), sum, recordv1.Outcome_OUTCOME_SUCCEEDED, 201
				if err := restartStep(tx, x, recordv1.State_STATE_COMPLETED); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// TestRestartAtScale measures the time from start to serving (New, Run,
// the first answered health check on the socket) on a store of
// LATCH_RESTART_N executions, one in LATCH_RESTART_UNSETTLED_EVERY (default
// 10) unsettled. Skipped when LATCH_RESTART_N is unset: building a million
// executions takes minutes. LATCH_RESTART_DIR keeps the built data dir
// between runs (it is built when it holds none). With
// LATCH_RESTART_OLDER=1 the first round starts on the store as a latch
// before the token journal index left it (no m/tokens_indexed): that start
// builds the index (one read of the journal, store.IndexTokens).
func TestRestartAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LATCH_RESTART_N"))
	if n <= 0 {
		t.Skip("set LATCH_RESTART_N (e.g. 1000000) to measure a restart on a store of that many executions")
	}
	every, _ := strconv.Atoi(os.Getenv("LATCH_RESTART_UNSETTLED_EVERY"))
	if every <= 0 {
		every = 10
	}
	data := os.Getenv("LATCH_RESTART_DIR")
	if data == "" {
		data = t.TempDir()
	}
	if _, err := os.Stat(datadir.DB(data)); err != nil {
		start := time.Now()
		buildRestartStore(t, data, n, every, time.Now().Add(24*time.Hour)) // far away: a measured start changes nothing
		t.Logf("built %d executions (%d unsettled) in %v", n, (n+every-1)/every, time.Since(start))
	}
	if os.Getenv("LATCH_RESTART_OLDER") == "1" {
		kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Commit([]store.Write{{Key: []byte("m/tokens_indexed"), Delete: true}}); err != nil {
			t.Fatal(err)
		}
		kv.Close()
	}
	for round := range 3 {
		var ru0 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0) //nolint:errcheck // a measurement
		cfg := stateConfig(t, data, 0)
		cfg.Socket = filepath.Join(shortDir(t), "c.sock")
		cfg.Recovery = engine.RecoveryConfig{MinBackoff: time.Hour, MaxBackoff: 2 * time.Hour}
		start := time.Now()
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		built := time.Since(start)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		conn, err := grpc.NewClient("unix://"+cfg.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		hc := healthpb.NewHealthClient(conn)
		for {
			cctx, ccancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
			ccancel()
			if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				break
			}
			if time.Since(start) > 10*time.Minute {
				t.Fatalf("not serving after 10 minutes: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
		serving := time.Since(start)
		var ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1) //nolint:errcheck // a measurement
		cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		if round == 0 && srv.tokenIndexReady != nil {
			<-srv.tokenIndexReady // built while serving (a store written before the token index)
			t.Logf("round 0: the token journal index was built %v after start (serving meanwhile)", time.Since(start))
		}
		if round == 0 && srv.gate != nil {
			<-srv.gate.Done() // the start-up check of the unsettled executions, run while serving
			t.Logf("round 0: the start-up check of the unsettled executions ended %v after start (serving meanwhile)", time.Since(start))
		}
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		t.Logf("round %d: start to serving %v (New %v, process CPU meanwhile %v) on %d executions", round, serving, built, cpu, n)
	}
}

func shortDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "rs")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// counting answers every dispatch with 201 and records the execution IDs
// it was sent.
type counting struct {
	answering
	mu   sync.Mutex
	sent map[string]int
}

func (c *counting) Dispatch(ctx context.Context, call engine.Call) engine.Attempt {
	c.mu.Lock()
	c.sent[call.Execution.GetId()]++
	c.mu.Unlock()
	return c.answering.Dispatch(ctx, call)
}

// TestForgedUnsettledNeverActedOn: a large store (start-up gate, serving at
// once) whose outcome_unknown execution was forged (its arguments
// rewritten) and is due for recovery right away: the control plane stops
// with ErrStateMismatch naming it, and never re-sends it, while the sound
// unsettled executions beside it may be recovered.
func TestForgedUnsettledNeverActedOn(t *testing.T) {
	data := t.TempDir()
	buildRestartStore(t, data, 200, 10, time.Now().Add(-time.Hour))
	forged := fmt.Sprintf("act_%026d", 50)
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := kv.Get([]byte("x/" + forged))
	if err != nil {
		t.Fatal(err)
	}
	x := &recordv1.Execution{}
	if err := proto.Unmarshal(v, x); err != nil {
		t.Fatal(err)
	}
	x.Arguments = []byte(`{"version":"forged"}`)
	if v, err = proto.Marshal(x); err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]store.Write{{Key: []byte("x/" + forged), Value: v}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	ch := &counting{sent: map[string]int{}}
	cfg := stateConfig(t, data, -1)
	cfg.Socket = filepath.Join(shortDir(t), "c.sock")
	cfg.Channels = map[tools.Channel]engine.Channel{tools.ChannelHTTP: ch}
	cfg.Recovery = engine.RecoveryConfig{MinBackoff: time.Millisecond, MaxBackoff: time.Second, Interval: 10 * time.Millisecond}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New on a large store = %v; it serves first and checks while serving", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = srv.Run(ctx)
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), forged) {
		t.Errorf("Run = %v, want ErrStateMismatch naming %s", err, forged)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if n := ch.sent[forged]; n != 0 {
		t.Errorf("the forged execution was sent %d times, want never", n)
	}
}

package events

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/backoff"
	"github.com/latchhq/latch/internal/egress"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Defaults of Config.
const (
	DefaultMaxAttempts  = 12
	DefaultUnknownAfter = 10 * time.Minute
	DefaultTimeout      = 10 * time.Second
	// DefaultRetention is how long a delivered event is kept (listed by
	// latch events list, replayable by ID) before it is pruned.
	DefaultRetention = 7 * 24 * time.Hour
	// pruneEvery is how often the active replica prunes.
	pruneEvery = time.Hour
	// drainPage is how many queued events one read takes; a pass reads
	// the whole queue page by page, so a sink in backoff never starves
	// the events behind it.
	drainPage = 500
)

// Metrics receives delivery outcomes (controlplane/telemetry implements it; nil: none).
type Metrics interface {
	Delivered(sink string, latency time.Duration)
	Failed(sink string)
	DeadLettered(sink string)
}

// Config configures an Outbox.
type Config struct {
	Logger hclog.Logger
	Store  *store.Store
	Sinks  []Sink
	// Secret returns the whsec_ signing secret held by the vault credential
	// a sink names.
	Secret func(credential string) (string, error)
	// Holds reports whether this replica may deliver now (the active
	// replica that holds its lease; nil: always).
	Holds func() bool
	// ConsoleURL is the console's base URL for deep links ("": none).
	ConsoleURL string
	// UnknownAfter: an execution outcome_unknown this long gets an
	// outcome_unknown event (default DefaultUnknownAfter; negative: never).
	UnknownAfter time.Duration
	// MaxAttempts per sink before the delivery is dead-lettered.
	MaxAttempts int
	// Backoff between attempts of one delivery (default 1s doubling to 10m).
	Backoff backoff.Policy
	// Timeout bounds one delivery exchange.
	Timeout time.Duration
	Clock   func() time.Time
	// Poll is how often the queue is read without a wake-up (default 1s).
	Poll time.Duration
	// Retention: a delivered event older than this is pruned (default
	// DefaultRetention; negative: kept forever). Dead-lettered and
	// queued events are never pruned.
	Retention time.Duration
	Metrics   Metrics
}

// Outbox drains the store's event outbox to the sinks.
type Outbox struct {
	cfg     Config
	log     hclog.Logger
	clients map[string]*http.Client
	wake    chan struct{}
}

// New builds an Outbox; it checks every sink's CA file.
func New(cfg Config) (*Outbox, error) {
	if cfg.Store == nil {
		return nil, errors.New("events: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Holds == nil {
		cfg.Holds = func() bool { return true }
	}
	if cfg.UnknownAfter == 0 {
		cfg.UnknownAfter = DefaultUnknownAfter
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Backoff.Min <= 0 {
		cfg.Backoff = backoff.Policy{Min: time.Second, Max: 10 * time.Minute, Jitter: true}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	o := &Outbox{cfg: cfg, log: cfg.Logger.Named("events"), clients: make(map[string]*http.Client), wake: make(chan struct{}, 1)}
	seen := map[string]bool{}
	for _, s := range cfg.Sinks {
		if seen[s.Name] {
			return nil, fmt.Errorf("%w: two sinks are named %q", ErrBadSink, s.Name)
		}
		seen[s.Name] = true
		ec := egress.Config{Policy: egress.Policy{AllowPrivate: s.AllowPrivate, Hint: "set allow_private=true on the event sink if it is meant to be reached"},
			Timeout: cfg.Timeout}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w %s: ca_file: %w", ErrBadSink, s.Name, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w %s: ca_file %s holds no PEM certificate", ErrBadSink, s.Name, s.CAFile)
			}
			ec.TLSConfig = &tls.Config{RootCAs: pool}
		}
		o.clients[s.Name] = egress.NewClient(ec, nil)
	}
	return o, nil
}

// Sinks are the configured sinks.
func (o *Outbox) Sinks() []Sink { return o.cfg.Sinks }

// Wake makes Run read the queue now (after a replay).
func (o *Outbox) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Run drains the outbox until ctx ends.
func (o *Outbox) Run(ctx context.Context) error {
	t := time.NewTicker(o.cfg.Poll)
	defer t.Stop()
	var pruned time.Time
	for {
		if o.cfg.Holds() {
			if err := o.markUnknown(ctx); err != nil && ctx.Err() == nil {
				o.log.Warn("could not record outcome_unknown events", "error", err)
			}
			if err := o.Drain(ctx); err != nil && ctx.Err() == nil {
				o.log.Warn("event delivery pass failed", "error", err)
			}
			if now := o.cfg.Clock(); now.Sub(pruned) >= pruneEvery {
				pruned = now
				if n, err := o.Prune(ctx); err != nil && ctx.Err() == nil {
					o.log.Warn("could not prune delivered events", "error", err)
				} else if n > 0 {
					o.log.Info("pruned delivered events", "events", n, "older_than", o.cfg.Retention)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-o.wake:
		case <-o.cfg.Store.EventsC():
		}
	}
}

// markUnknown records the outcome_unknown event of every execution
// unknown longer than UnknownAfter (once per execution).
func (o *Outbox) markUnknown(ctx context.Context) error {
	if o.cfg.UnknownAfter < 0 || !o.takes(recordv1.EventKind_EVENT_KIND_OUTCOME_UNKNOWN) {
		return nil
	}
	xs, err := o.cfg.Store.List(store.Filter{State: recordv1.State_STATE_OUTCOME_UNKNOWN, Limit: 500, OldestFirst: true})
	if err != nil {
		return err
	}
	now := o.cfg.Clock()
	for _, x := range xs {
		since := x.GetUpdatedAt().AsTime()
		if d := x.GetDispatchedAt(); d != nil {
			since = d.AsTime()
		}
		if now.Sub(since) < o.cfg.UnknownAfter {
			continue
		}
		ev := executionEvent(UnknownEventID(x.GetId()), recordv1.EventKind_EVENT_KIND_OUTCOME_UNKNOWN, x)
		ev.Time, ev.JournalIndex = timestamppb.New(now), x.GetJournalIndex()
		ev = addressed(ev, o.cfg.Sinks)
		if err := o.cfg.Store.Update(ctx, func(tx *store.Tx) error {
			_, err := tx.PutEventOnce(x.GetId(), ev)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// takes reports whether some sink takes kind k.
func (o *Outbox) takes(k recordv1.EventKind) bool {
	for _, s := range o.cfg.Sinks {
		if s.Takes(k) {
			return true
		}
	}
	return false
}

// Drain tries every due delivery of the queue once, oldest first.
func (o *Outbox) Drain(ctx context.Context) error {
	after := ""
	for {
		evs, err := o.cfg.Store.Events(store.EventFilter{Pending: true, Oldest: true, Limit: drainPage, After: after})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ctx.Err() != nil || !o.cfg.Holds() {
				return nil
			}
			if err := o.deliver(ctx, ev); err != nil {
				return err
			}
		}
		if len(evs) < drainPage {
			return nil
		}
		after = evs[len(evs)-1].GetId()
	}
}

// Prune deletes the delivered events older than Retention (every sink
// delivered them; none is queued or dead-lettered); it returns how many.
func (o *Outbox) Prune(ctx context.Context) (int, error) {
	if o.cfg.Retention < 0 {
		return 0, nil
	}
	cutoff := o.cfg.Clock().Add(-o.cfg.Retention)
	n, after := 0, ""
	for {
		evs, err := o.cfg.Store.Events(store.EventFilter{Oldest: true, Limit: drainPage, After: after})
		if err != nil || len(evs) == 0 {
			return n, err
		}
		var old []string
		for _, ev := range evs {
			if ev.GetTime().AsTime().Before(cutoff) && delivered(ev) {
				old = append(old, ev.GetId())
			}
		}
		if len(old) > 0 {
			if err := o.cfg.Store.Update(ctx, func(tx *store.Tx) error {
				for _, id := range old {
					tx.DeleteEvent(id)
				}
				return nil
			}); err != nil {
				return n, err
			}
			n += len(old)
		}
		if len(evs) < drainPage {
			return n, nil
		}
		after = evs[len(evs)-1].GetId()
	}
}

// delivered reports whether every delivery of ev reached its sink.
func delivered(ev *recordv1.OutboxEvent) bool {
	for _, d := range ev.GetDeliveries() {
		if d.GetDeliveredAt() == nil {
			return false
		}
	}
	return true
}

// deliver sends ev to each sink that takes it and has it due, and
// records what happened.
func (o *Outbox) deliver(ctx context.Context, ev *recordv1.OutboxEvent) error {
	now := o.cfg.Clock()
	next := proto.Clone(ev).(*recordv1.OutboxEvent)
	sinks := map[string]Sink{}
	for _, s := range o.cfg.Sinks {
		sinks[s.Name] = s
	}
	changed := false
	for _, d := range next.Deliveries {
		if d.GetDeliveredAt() != nil || d.GetDead() || (d.GetNextAttemptAt() != nil && d.GetNextAttemptAt().AsTime().After(now)) {
			continue
		}
		s, ok := sinks[d.GetSink()]
		if !ok {
			// The sink was removed from the configuration: the delivery
			// waits in the dead-letter list, replayable once it is back.
			d.Dead, d.NextAttemptAt, changed = true, nil, true
			d.LastError = fmt.Sprintf("no event sink is named %q any more (configure it again, then latch events replay %s)", d.GetSink(), ev.GetId())
			continue
		}
		start := time.Now()
		status, err := o.Send(ctx, s, ev)
		changed = true
		d.Attempts++
		d.LastStatus = int32(status)
		if err == nil {
			d.DeliveredAt, d.LastError, d.NextAttemptAt = timestamppb.New(o.cfg.Clock()), "", nil
			if o.cfg.Metrics != nil {
				o.cfg.Metrics.Delivered(s.Name, time.Since(start))
			}
			o.log.Debug("event delivered", "event_id", ev.GetId(), "sink", s.Name, "attempt", d.Attempts)
			continue
		}
		d.LastError = err.Error()
		if o.cfg.Metrics != nil {
			o.cfg.Metrics.Failed(s.Name)
		}
		if int(d.Attempts) >= o.cfg.MaxAttempts {
			d.Dead, d.NextAttemptAt = true, nil
			if o.cfg.Metrics != nil {
				o.cfg.Metrics.DeadLettered(s.Name)
			}
			o.log.Warn("event dead-lettered: replay it with latch events replay", "event_id", ev.GetId(), "sink", s.Name, "attempts", d.Attempts, "error", err)
			continue
		}
		d.NextAttemptAt = timestamppb.New(o.cfg.Clock().Add(o.cfg.Backoff.Delay(int(d.Attempts))))
		o.log.Info("event delivery failed; it is retried", "event_id", ev.GetId(), "sink", s.Name, "attempt", d.Attempts, "error", err)
	}
	if !changed {
		return nil
	}
	return o.cfg.Store.Update(ctx, func(tx *store.Tx) error {
		cur, err := tx.Event(ev.GetId())
		if err != nil {
			return err
		}
		if !proto.Equal(cur, ev) {
			return nil // replayed meanwhile: the next pass reads it again
		}
		return tx.PutEvent(next)
	})
}

// Send delivers ev to s once: the body in s's format, signed when s has a
// secret. It returns the receiver's status; any non-2xx is an error.
func (o *Outbox) Send(ctx context.Context, s Sink, ev *recordv1.OutboxEvent) (int, error) {
	var body []byte
	var err error
	if s.Format == FormatSlack {
		body, err = SlackPayload(ev, o.cfg.ConsoleURL)
	} else {
		body, err = Payload(ev, o.cfg.ConsoleURL)
	}
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "latch-events")
	ts := o.cfg.Clock()
	req.Header.Set("webhook-id", ev.GetId())
	req.Header.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
	if s.Secret != "" {
		if o.cfg.Secret == nil {
			return 0, fmt.Errorf("sink %s: no vault to read its secret from", s.Name)
		}
		secret, err := o.cfg.Secret(s.Secret)
		if err != nil {
			return 0, fmt.Errorf("sink %s: signing secret %q: %w", s.Name, s.Secret, err)
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return 0, fmt.Errorf("sink %s: credential %q does not hold a whsec_ base64 secret", s.Name, s.Secret)
		}
		sig, err := wh.Sign(ev.GetId(), ts, body)
		if err != nil {
			return 0, fmt.Errorf("sink %s: sign: %w", s.Name, err)
		}
		req.Header.Set("webhook-signature", sig)
	}
	resp, err := o.clients[s.Name].Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may be the secret (a Slack hook): never in an error or log line
		}
		return 0, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("sink %s answered %d", s.Name, resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// Replay puts the events named back in the queue for every sink, attempts
// reset (delivered ones are sent again, under the same ID), or, when ids
// is empty, every dead-lettered delivery; it returns how many events it
// requeued.
func (o *Outbox) Replay(ctx context.Context, ids []string) (int, error) {
	named := len(ids) > 0
	if !named {
		evs, err := o.cfg.Store.Events(store.EventFilter{Dead: true, Oldest: true, Limit: 10000})
		if err != nil {
			return 0, err
		}
		for _, ev := range evs {
			ids = append(ids, ev.GetId())
		}
	}
	n := 0
	err := o.cfg.Store.Update(ctx, func(tx *store.Tx) error {
		n = 0
		for _, id := range ids {
			ev, err := tx.Event(id)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w: %s", ErrUnknownEvent, id)
			}
			if err != nil {
				return err
			}
			again := false
			if named {
				// A sink configured since the event was made takes it too.
				has := map[string]bool{}
				for _, d := range ev.Deliveries {
					has[d.GetSink()] = true
				}
				for _, s := range o.cfg.Sinks {
					if s.Takes(ev.GetKind()) && !has[s.Name] {
						ev.Deliveries = append(ev.Deliveries, &recordv1.EventDelivery{Sink: s.Name})
						again = true
					}
				}
			}
			for _, d := range ev.Deliveries {
				if d.GetDead() || named {
					d.Dead, d.Attempts, d.NextAttemptAt, d.DeliveredAt, d.LastError = false, 0, nil, nil, ""
					again = true
				}
			}
			if again {
				if err := tx.PutEvent(ev); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	o.Wake()
	return n, err
}

// ErrUnknownEvent is returned by Replay for an ID the outbox does not hold.
var ErrUnknownEvent = errors.New("events: no such event")

package httpdispatch

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/testbin"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/demotarget"
)

// BenchmarkSend measures POSTs to the demo target on loopback, each with a
// fresh idempotency key, through the dispatcher and through a plain
// net/http client with the same connection pool size.
//
//	go test -run '^$' -bench BenchmarkSend -benchtime 3s ./controlplane/httpdispatch
func BenchmarkSend(b *testing.B) {
	body := []byte(`{"service":"api","version":"1.2.3","region":"eu-west-1"}`)
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("dispatcher/p%d", workers), func(b *testing.B) {
			srv := httptest.NewServer(demotarget.New(demotarget.Config{}))
			defer srv.Close()
			d, err := New(Config{Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			tg := demoTarget("http", srv.Listener.Addr().String())
			b.ReportAllocs()
			testbin.Load(b, workers, func(i int64) error {
				obs, err := d.Send(b.Context(), Call{
					ExecutionID: "exec-" + strconv.FormatInt(i, 10),
					Target:      tg,
					Method:      http.MethodPost,
					Path:        "/v1/releases",
					Body:        body,
				})
				if err != nil {
					return err
				}
				if obs.Status != http.StatusCreated {
					return fmt.Errorf("status %d: %s", obs.Status, obs.Body)
				}
				return nil
			})
		})
		b.Run(fmt.Sprintf("plain/p%d", workers), func(b *testing.B) {
			srv := httptest.NewServer(demotarget.New(demotarget.Config{}))
			defer srv.Close()
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 64
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			defer tr.CloseIdleConnections()
			url := srv.URL + "/v1/releases"
			b.ReportAllocs()
			testbin.Load(b, workers, func(i int64) error {
				req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					return err
				}
				req.Header.Set("Idempotency-Key", "exec-"+strconv.FormatInt(i, 10))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				_, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
				if err != nil {
					return err
				}
				if resp.StatusCode != http.StatusCreated {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			})
		})
	}
}

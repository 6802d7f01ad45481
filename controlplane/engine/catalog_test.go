package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/latchhq/latch/tools"
)

// TestExecutionRecordsItsCatalogVersion: an execution is stamped with the
// version it was accepted under; after SetCatalog new executions get the
// new version, old ones keep theirs, and a tool that left the catalog is
// unknown to Submit.
func TestExecutionRecordsItsCatalogVersion(t *testing.T) {
	h := newHarnessWith(t, "", nil, func(c *Config) { c.CatalogVersion = "sha256:one" })
	first := h.submit(t, "alice", "deploy", `{"service":"api","version":"1"}`).Execution
	if got := first.GetCatalogVersion(); got != "sha256:one" {
		t.Fatalf("execution catalog_version = %q, want sha256:one", got)
	}
	onlyOrder := strings.Replace(testCatalog, "  deploy:\n", "  deploy_v2:\n", 1)
	cat, err := tools.Parse("test.yaml", []byte(onlyOrder))
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan string, 1)
	go func() {
		_, v := h.e.WaitCatalog(context.Background(), "sha256:one")
		changed <- v
	}()
	h.e.SetCatalog(cat, "sha256:two")
	if v := <-changed; v != "sha256:two" {
		t.Errorf("WaitCatalog = %q, want sha256:two", v)
	}
	second := h.submit(t, "alice", "deploy_v2", `{"service":"api","version":"2"}`).Execution
	if got := second.GetCatalogVersion(); got != "sha256:two" {
		t.Errorf("execution accepted after the reload has catalog_version %q, want sha256:two", got)
	}
	if x, err := h.st.Execution(first.GetId()); err != nil || x.GetCatalogVersion() != "sha256:one" {
		t.Errorf("the first execution now says %q (%v), want sha256:one kept", x.GetCatalogVersion(), err)
	}
	if _, err := h.e.Submit(context.Background(), SubmitInput{Actor: "alice", Tool: "deploy", Arguments: json.RawMessage(`{"service":"api","version":"3"}`)}); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("Submit(deploy) after it left the catalog = %v, want ErrUnknownTool", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, v := h.e.WaitCatalog(ctx, "sha256:two"); v != "sha256:two" {
		t.Errorf("WaitCatalog(ended ctx) = %q, want the version in force", v)
	}
}

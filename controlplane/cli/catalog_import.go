package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/tools/openapi"
)

const catalogImportSynopsis = `catalog import openapi SPEC --target NAME [--base-url URL] [--idempotency-header H] [--status-path PATH] [-o FILE]

Proposes catalog tools from an OpenAPI 3.0 or 3.1 description (JSON or YAML;
SPEC - reads standard input), one per operation, all for one http target:
GET and HEAD read_only; an operation taking the idempotency header
idempotency_key; one whose lookup by that key is documented (an OpenAPI link
passing $request.header.<H>, or --status-path) status_query, proposed; every
other one review, with a comment saying why. Every tool is marked REVIEW:
read it before loading it. The catalog passes the loader's validation
(latch catalog validate); counts per replay class go to standard error.`

// runCatalogImport is `latch catalog import openapi`: offline, it reads a
// description and writes a catalog (tools/openapi does the conversion).
func runCatalogImport(ctx context.Context, env *Env, args []string) error {
	if len(args) > 0 && args[0] == "openapi" {
		args = args[1:]
	} else if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return usagef("catalog import knows one format: latch catalog import openapi SPEC --target NAME")
	}
	fs := newFlagSet(env, "catalog import openapi", catalogImportSynopsis)
	target := fs.String("target", "", "name of the http target the tools are for (^[a-z][a-z0-9_-]{0,63}$); required")
	baseURL := fs.String("base-url", "", "the target's base_url (default: the description's first server, its variables at their defaults)")
	header := fs.String("idempotency-header", openapi.DefaultIdempotencyHeader, "the header that carries an idempotency key in this API")
	statusPath := fs.String("status-path", "", "a lookup by key the API has, e.g. /v1/orders/by-key/{execution_id}: operations taking the key become status_query")
	maxDepth := fs.Int("max-depth", openapi.DefaultMaxDepth, "nesting bound of an input_schema: deeper schemas are cut (with a comment)")
	out := fs.String("o", "", "write the catalog to FILE (default: standard output)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("catalog import openapi needs one description: latch catalog import openapi SPEC --target NAME")
	}
	if *target == "" {
		return usagef("catalog import openapi needs --target NAME: the http target the tools are for")
	}
	spec, err := readSpec(env, pos[0])
	if err != nil {
		return err
	}
	r, err := openapi.Import(ctx, spec, openapi.Options{
		Target:            *target,
		BaseURL:           *baseURL,
		IdempotencyHeader: *header,
		StatusPath:        *statusPath,
		MaxDepth:          *maxDepth,
		Source:            filepath.Base(pos[0]),
		Registry:          channels.Default().Catalog(),
	})
	if err != nil {
		return fmt.Errorf("catalog import openapi %s: %w", pos[0], err)
	}
	if *out == "" {
		if _, err := env.Stdout.Write(r.YAML); err != nil {
			return err
		}
	} else if err := os.WriteFile(*out, r.YAML, 0o644); err != nil { //nolint:gosec // a catalog holds no secret (credentials are vault references) and the control plane must read it
		return fmt.Errorf("catalog import openapi: %w", err)
	}
	fmt.Fprintf(env.Stderr, "%d operations: %s\n", len(r.Operations), r.Counts())
	if r.Cuts > 0 {
		fmt.Fprintf(env.Stderr, "%d schemas cut at a bound (marked \"# cut:\" in input_schema)\n", r.Cuts)
	}
	if *out != "" {
		fmt.Fprintf(env.Stderr, "wrote %s: review every tool (marked REVIEW), then latch catalog validate %s\n", *out, *out)
	}
	return nil
}

// readSpec reads a description, "-" being standard input, bounded.
func readSpec(env *Env, name string) ([]byte, error) {
	var rd io.Reader
	if name == "-" {
		rd = env.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("catalog import openapi: %w", err)
		}
		defer f.Close()
		rd = f
	}
	b, err := io.ReadAll(io.LimitReader(rd, openapi.MaxSpecSize+1))
	if err != nil {
		return nil, fmt.Errorf("catalog import openapi: reading %s: %w", name, err)
	}
	if len(b) > openapi.MaxSpecSize {
		return nil, fmt.Errorf("catalog import openapi: %s is larger than %d bytes", name, openapi.MaxSpecSize)
	}
	return b, nil
}

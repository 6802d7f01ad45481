// Package openapi turns an OpenAPI 3.0 or 3.1 description into catalog
// tools for one http target: `latch catalog import openapi` is its command
// (controlplane/cli). It proposes contracts, it does not decide them: every
// generated tool carries a comment marking it for review, and the replay
// class follows only what the description documents:
//
//   - GET and HEAD are read_only;
//   - an operation that takes the idempotency header (Idempotency-Key unless
//     configured) is idempotency_key, and the target gets idempotency_header;
//   - such an operation with a documented lookup by that key (an OpenAPI link
//     whose parameter is $request.header.<header>, or Options.StatusPath) is
//     proposed as status_query, the lookup becoming the target's status;
//   - everything else is review, with a comment saying why.
//
// Parameters (path, query, header) and a JSON request body (as the argument
// "body") become input_schema with every $ref resolved; a schema is cut at a
// bound (nesting depth, nodes per tool, a $ref that recurses into itself) and
// the cut is marked with a comment, so a cyclic or huge description can
// neither loop nor explode. Operations Latch cannot send (a required body
// that is not JSON, a required cookie, a path that is not a plain URL path)
// are listed as skipped with the reason.
//
// The output is checked with the catalog loader (tools.Registry.Parse, the
// validator `latch catalog validate` uses) before Import returns it: what
// Import returns always loads. Parsing is github.com/getkin/kin-openapi's
// loader, with external references refused (a description never makes the
// importer read another file or fetch a URL).
//
// Importable by anyone; imports tools and kin-openapi only.
package openapi

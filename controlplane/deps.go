//go:build deps

// This file keeps the project's chosen dependencies in go.mod while the
// packages that use them are being written. It is never built.
package controlplane

import (
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/gliderlabs/ssh"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/jsonschema-go/jsonschema"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/oklog/ulid/v2"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/crypto/argon2"
	_ "golang.org/x/crypto/hkdf"
	_ "golang.org/x/crypto/nacl/secretbox"
	_ "golang.org/x/crypto/ssh"
	_ "golang.org/x/crypto/ssh/knownhosts"
	_ "golang.org/x/mod/sumdb/note"
	_ "golang.org/x/mod/sumdb/tlog"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health"
	_ "google.golang.org/protobuf/proto"
)

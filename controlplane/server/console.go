package server

import (
	"strings"

	"github.com/latchhq/latch/controlplane/api"
)

// What the operator console (controlplane/console) reads from a running
// control plane besides its Store, Engine, Tokens and Catalog.

// API is the ControlPlane service the gRPC listeners serve: the console
// makes its decisions through it, so they are journaled as the CLI's are.
func (s *Server) API() *api.Service { return s.api }

// DataDir is the control plane's data directory.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// VerifierKey is the journal's checkpoint verifier key (note form), ""
// when it cannot be read.
func (s *Server) VerifierKey() string { return strings.TrimSpace(readOr(VerifierPath(s.cfg.DataDir))) }

// OnPostgres reports whether the store is PostgreSQL (the audit commands
// then take --store instead of a data dir).
func (s *Server) OnPostgres() bool { return s.pg != nil }

package server

import (
	"github.com/latchhq/latch/controlplane/api"
)

// What the operator console (controlplane/console) reads from a running
// control plane besides its Store, Engine, Tokens and Catalog.

// API is the ControlPlane service the gRPC listeners serve: the console
// makes its decisions through it, so they are journaled as the CLI's are.
func (s *Server) API() *api.Service { return s.api }

// DataDir is the control plane's data directory.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// VerifierKey is the journal's checkpoint verifier key (note form): the
// signer's public half, wherever the keys are kept (files or the store).
func (s *Server) VerifierKey() string { return s.verifier }

// OnPostgres reports whether the store is PostgreSQL (the audit commands
// then take --store instead of a data dir).
func (s *Server) OnPostgres() bool { return s.pg != nil }

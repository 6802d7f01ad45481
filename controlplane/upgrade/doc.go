// Package upgrade holds the mixed-version test of an upgrade (all in its
// tests): the previous release's latch-hostagent against this tree's
// latch serve, and the previous latch serve against this tree's host
// agent, both built from git history. docs/how-to/upgrade.md says what
// each binary accepts from an older or newer peer. Nothing imports it.
package upgrade

// Package examples holds Latch's example tool catalog, embedded for `latch dev`.
package examples

import _ "embed"

// Catalog is the example catalog (catalog.yaml); parse it with tools.Parse.
//
//go:embed catalog.yaml
var Catalog []byte

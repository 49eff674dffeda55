//go:build tools

// Package tools pins kwok (sigs.k8s.io/kwok at the version go.mod requires), which
// ../../build-peers.sh compiles through this module, so `go mod tidy` keeps it.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)

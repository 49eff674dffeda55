//go:build tools

// Package tools pins the Kueue manager that build.sh compiles (sigs.k8s.io/kueue/cmd/kueue at the
// version go.mod requires), so `go mod tidy` keeps it.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)

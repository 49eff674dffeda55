//go:build tools

// Package tools pins the Helm CLI that build.sh compiles (helm.sh/helm/v3 at the version go.mod
// requires), so `go mod tidy` keeps it.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)

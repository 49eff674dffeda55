//go:build tools

// Package tools pins Kubeflow's training operator v1 (github.com/kubeflow/training-operator at
// the version go.mod requires), which ../../build-peers.sh compiles through this module.
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
)

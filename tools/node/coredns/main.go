// Command coredns is CoreDNS with only the plugins the test node's Corefile uses
// (tools/node/node.py writes it): kubernetes, bind, errors, cache, health, ready, log.
// Leaving out the other plugins (cloud DNS back ends, etcd, gRPC...) keeps the build short.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }

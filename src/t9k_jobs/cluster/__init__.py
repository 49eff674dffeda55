"""The Kubernetes runtime: client, informers, work queue, expectations, controller, leader election."""

"""t9k-jobs: the T9k batch job API (``batch.tensorstack.dev/v1beta1``) on Kubernetes or on one machine."""

__version__ = "0.1.0"

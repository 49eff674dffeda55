"""Prometheus metrics of the operator (prometheus_client, default registry).

Names follow controller-runtime and client-go where one exists, so dashboards built for Go
operators read ours too: ``controller_runtime_reconcile_total``,
``controller_runtime_reconcile_time_seconds``, ``workqueue_depth``, ``workqueue_adds_total``,
``workqueue_retries_total``, ``workqueue_queue_duration_seconds``,
``rest_client_requests_total``, ``rest_client_request_duration_seconds``,
``leader_election_master_status``. Ours: ``t9k_jobs_jobs`` (jobs by kind and phase),
``t9k_jobs_pods_created_total``, ``t9k_jobs_pods_deleted_total``,
``t9k_jobs_children_created_total``, ``t9k_jobs_api_errors_total``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CONTROLLER = "t9k-jobs"

RECONCILES = Counter(
    "controller_runtime_reconcile_total",
    "Reconcile passes by result (success, error, requeue, requeue_after, skipped, invalid, deleted).",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total", "Reconcile passes that ended in an error.", ["controller"]
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Duration of one reconcile pass, in seconds.",
    ["controller"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
QUEUE_DEPTH = Gauge("workqueue_depth", "Keys waiting in the work queue.", ["name"])
QUEUE_ADDS = Counter("workqueue_adds_total", "Keys added to the work queue.", ["name"])
QUEUE_RETRIES = Counter("workqueue_retries_total", "Keys re-added with backoff after an error.", ["name"])
QUEUE_LATENCY = Histogram(
    "workqueue_queue_duration_seconds",
    "Seconds a key waited in the work queue before a worker took it.",
    ["name"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0),
)
JOBS = Gauge("t9k_jobs_jobs", "Jobs in the informer cache by kind and phase.", ["kind", "phase"])
PODS_CREATED = Counter("t9k_jobs_pods_created_total", "Replica pods created.", ["kind"])
PODS_DELETED = Counter("t9k_jobs_pods_deleted_total", "Replica pods deleted.", ["kind", "reason"])
CHILDREN_CREATED = Counter(
    "t9k_jobs_children_created_total", "Children other than pods created (Service, ConfigMap, ...).", ["kind"]
)
API_ERRORS = Counter(
    "t9k_jobs_api_errors_total",
    "API calls of the reconciler that failed, by verb and reason.",
    ["verb", "reason"],
)
LOG_PROBES = Counter(
    "t9k_jobs_log_probes_total",
    "Last-line reads of a running container's log for a job's progress deadline, by outcome (read, failed).",
    ["outcome"],
)
LOST_REPLICA_SECONDS = Counter(
    "t9k_jobs_lost_replica_seconds_total",
    "Seconds that replica pods ran in attempts that ended without finishing, by why they ended "
    "(Failed, Restart, NoProgress, NodeLost, Preempted, ...); per job: t9k-jobs describe.",
    ["reason"],
)
LOST_GPU_SECONDS = Counter(
    "t9k_jobs_lost_gpu_seconds_total",
    "GPU-seconds (seconds times the GPUs the replica asks for) of attempts that ended without finishing, by why.",
    ["reason"],
)
API_REQUESTS = Counter("rest_client_requests_total", "HTTP requests to the API server.", ["verb", "code"])
API_LATENCY = Histogram(
    "rest_client_request_duration_seconds",
    "Latency of API requests (watches excluded), in seconds.",
    ["verb"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0),
)
LEADER = Gauge("leader_election_master_status", "1 while this process holds the leader lease.", ["name"])
INVALID_JOBS = Gauge("t9k_jobs_invalid_jobs", "Jobs in the cache whose spec does not validate.", ["kind"])

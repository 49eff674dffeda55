"""What installs t9k-jobs on a cluster, generated from the code: the CRDs (:mod:`.crd`, from the API
models), the namespace, RBAC and operator Deployment (:mod:`.rbac`), the Helm chart (:mod:`.chart`)
and ``t9k-jobs install`` (:mod:`.install`), which server-side applies the same objects.

It sits above :mod:`t9k_jobs.cluster` (the operator and the SDK's cluster backend), whose resource
tables say what the operator's role must allow; nothing below imports it.
"""

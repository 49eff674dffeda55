"""The SDK (issue 34): one package above both runtimes, as the CLI and the dashboard use it.

* :mod:`.client`: :class:`~t9k_jobs.sdk.client.Client` (``from t9k_jobs import Client``), the
  verbs' rules written once; :mod:`.async_client`: :class:`~t9k_jobs.sdk.async_client.AsyncClient`
  (the dashboard's); :mod:`.edits`: the one edit behind pause, resume and scale, for both;
* :mod:`.backend`: the :class:`~t9k_jobs.sdk.backend.Backend` and ``AsyncBackend`` protocols (and
  ``Runner``, ``AsyncRunner``) a target implements, with the same parameters per verb;
* :mod:`.view`: the one job view both backends return, and ``JobSummary``, ``Deleted``, ``Edited``;
* :mod:`.present`: the words of ``get``, ``why``, ``describe`` and ``wait`` over that view;
* :mod:`.arguments`: the one check of what the verbs are given (kinds, names, durations, phases);
* :mod:`.local`, :mod:`.local_aio`: this machine's runs (over the runtime in :mod:`t9k_jobs.local`);
* :mod:`.cluster`, :mod:`.cluster_api`, :mod:`.cluster_logs`, :mod:`.gang_why`,
  :mod:`.queue_position`: a cluster's jobs (over the operator's REST client and kubeconfig reader in
  :mod:`t9k_jobs.cluster`).

Imports here are lazy (nothing at package level): ``t9k-jobs get --local`` loads no cluster code.
"""

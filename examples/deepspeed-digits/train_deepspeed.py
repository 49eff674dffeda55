"""DeepSpeed ZeRO training of a small MLP on the scikit-learn digits data set, on CPU.

DeepSpeed's CPU accelerator (``DS_ACCELERATOR=cpu``, or picked by itself when no GPU is
found) with torch.distributed's gloo backend. The optimizer is torch's own Adam
(``"torch_adam": true`` in ds_config.json), so no optimizer op is compiled; DeepSpeed's CPU
shared-memory op is JIT-built on first use when a C++ compiler is present, else skipped.
ZeRO (stage 2 by default, ``--zero-stage`` overrides the config) partitions the optimizer
state and the gradients over the ranks. The digits data set ships with scikit-learn.

Ways to launch it (the folder holds ds_config.json; run from this folder):

* Under the DeepSpeed launcher over ssh, e.g. two workers with one slot each::

      deepspeed --hostfile=hostfile --launcher=pdsh --master_addr=127.0.0.1 \\
          --master_port=29700 train_deepspeed.py

* Without ssh, one launcher per worker (``--node_rank`` 0 and 1)::

      deepspeed --hostfile=hostfile --no_ssh --node_rank=0 --master_addr=127.0.0.1 \\
          --master_port=29700 train_deepspeed.py

* As plain processes: ``MASTER_ADDR=127.0.0.1 MASTER_PORT=29700 WORLD_SIZE=2 RANK=<r>
  LOCAL_RANK=0 python train_deepspeed.py``; or as a single process: ``python train_deepspeed.py``.

Rank 0 prints one line per epoch and ``final test_accuracy X``; with ``--output PATH`` it
also writes the metrics as JSON. The exit status is non-zero when training fails, or when
``--min-accuracy`` is given and the final accuracy is below it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import NoReturn

# Pick the CPU accelerator before deepspeed is imported (it reads this once, on import).
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="DeepSpeed ZeRO training on sklearn digits (CPU)")
    parser.add_argument("--epochs", type=int, default=15, help="number of epochs (default: 15)")
    parser.add_argument("--hidden", type=int, default=128, help="hidden layer width (default: 128)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--config",
        type=Path,
        default=HERE / "ds_config.json",
        help="DeepSpeed config (default: ds_config.json beside this script)",
    )
    parser.add_argument(
        "--zero-stage", type=int, choices=(0, 1, 2), default=None, help="override the config's ZeRO stage"
    )
    parser.add_argument("--output", type=Path, default=None, help="rank 0 writes final metrics as JSON here")
    parser.add_argument(
        "--min-accuracy", type=float, default=None, help="exit 3 when the final test accuracy is lower"
    )
    parser.add_argument(
        "--fail-rank",
        type=int,
        default=None,
        help="testing aid: this rank exits 7 after the first epoch (how launchers report a failed rank)",
    )
    # The DeepSpeed launcher appends --local_rank=N unless it is run with --no_local_rank.
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", "0")))
    return parser.parse_args(argv)


def load_data(seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Deterministic stratified 80/20 split, features standardised on the training part."""
    features, labels = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.2, random_state=seed, stratify=labels
    )
    scaler = StandardScaler().fit(x_train)
    as_tensors = lambda x, y: (  # noqa: E731
        torch.from_numpy(scaler.transform(x).astype(np.float32)),
        torch.from_numpy(y).long(),
    )
    return TensorDataset(*as_tensors(x_train, y_train)), TensorDataset(*as_tensors(x_test, y_test))


def sum_over_ranks(values: list[float]) -> list[float]:
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def skip_shm_op() -> None:
    """On CPU, DeepSpeed JIT-builds its shared-memory collectives op (deepspeed_shm_comm) at the
    first init_distributed: a C++ build of a minute or more, under a lock file in
    ~/.cache/torch_extensions that a build killed midway leaves behind, after which every later run
    waits on it for ever (seen: a run stopped during that build; another environment's torch,
    another clone's, rebuilds it). The op speeds up collectives among the ranks of one machine;
    each worker here runs one rank, so it would have nothing to do. It is not built, and plain
    gloo collectives run instead: the same results."""
    # By module name: the attribute deepspeed.comm.torch is the torch package itself.
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None


def describe(optimizer: object) -> str:
    """``DeepSpeedZeroOptimizer(Adam)`` under ZeRO, ``Adam`` without it."""
    inner = getattr(optimizer, "optimizer", None)
    name = type(optimizer).__name__
    return f"{name}({type(inner).__name__})" if inner is not None else name


def leave(code: int) -> NoReturn:
    """End the process with ``code`` now, from inside main() while the model still holds its process
    group. Freeing the last reference to a gloo process group (main() returning frees the DDP model,
    whose reducer holds it; so can destroy_process_group(), which is why it is not called) runs
    its destructor, which joins gloo's worker threads while it holds the GIL; a worker still
    dropping its last collective's tensors needs the GIL to do so: a deadlock (torch 2.5; seen
    under load as a rank that never ends after the final barrier, its job Running for ever).
    Interpreter finalization has a hazard of its own (gloo's threads torn down there can abort
    the process with SIGABRT). Everything worth keeping is written by now."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse_args(argv)
    torch.set_num_threads(1)
    started = time.monotonic()

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        # Started by hand: DeepSpeed still wants a process group, so make a world of one.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        defaults = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
        for name, value in {**defaults, "MASTER_PORT": str(port)}.items():
            os.environ.setdefault(name, value)
    skip_shm_op()
    # gloo on CPU; DeepSpeed's own CPU default is oneCCL, used only when its torch binding is installed.
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0

    config = json.loads(args.config.read_text())
    if args.zero_stage is not None:
        config.setdefault("zero_optimization", {})["stage"] = args.zero_stage
    micro_batch = int(config["train_micro_batch_size_per_gpu"])
    config.pop("train_batch_size", None)  # derived: micro batch x accumulation x world size

    torch.manual_seed(args.seed)  # the same initial weights everywhere
    train, test = load_data(args.seed)
    sampler = DistributedSampler(train, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=micro_batch, sampler=sampler)

    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    stage = engine.zero_optimization_stage()
    if is_main:
        print(
            f"deepspeed {deepspeed.__version__} torch {torch.__version__}: world_size {world_size}, "
            f"backend {dist.get_backend()}, ZeRO stage {stage}, optimizer {describe(engine.optimizer)}",
            flush=True,
        )
    else:
        print(f"rank {rank} of {world_size} joined on {socket.gethostname()} (pid {os.getpid()})", flush=True)
    loss_fn = nn.CrossEntropyLoss()

    accuracy, mean_loss = 0.0, float("nan")
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        loss_sum, seen = 0.0, 0
        for inputs, targets in loader:
            loss = loss_fn(engine(inputs), targets)
            engine.backward(loss)  # ZeRO reduces (stage 2: reduce-scatters) the gradients here
            engine.step()  # each rank updates its partition, then the parameters are all-gathered
            loss_sum += loss.item() * len(targets)
            seen += len(targets)
        loss_sum, seen = sum_over_ranks([loss_sum, seen])
        mean_loss = loss_sum / seen

        x_test, y_test = test.tensors
        engine.eval()
        with torch.no_grad():
            shard = slice(rank, None, world_size)
            correct = (engine(x_test[shard]).argmax(dim=1) == y_test[shard]).sum().item()
        engine.train()
        correct, total = sum_over_ranks([correct, len(y_test[shard])])
        accuracy = correct / total
        if is_main:
            line = f"epoch {epoch}/{args.epochs} loss {mean_loss:.4f} test_accuracy {accuracy:.4f}"
            print(line, flush=True)
        if args.fail_rank == rank:
            print(f"rank {rank}: failing on purpose (--fail-rank)", file=sys.stderr, flush=True)
            leave(7)

    if is_main:
        print(f"final test_accuracy {accuracy:.4f}", flush=True)
        if args.output is not None:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            metrics = {
                "test_accuracy": accuracy,
                "final_loss": mean_loss,
                "world_size": world_size,
                "zero_stage": stage,
                "epochs": args.epochs,
                "seconds": round(time.monotonic() - started, 3),
            }
            args.output.write_text(json.dumps(metrics, indent=2) + "\n")
    dist.barrier()  # every rank is done; the group is left to the process's end (leave())
    if args.min_accuracy is not None and accuracy < args.min_accuracy:
        if is_main:
            print(f"test accuracy {accuracy:.4f} is below {args.min_accuracy}", file=sys.stderr, flush=True)
        leave(3)
    leave(0)


if __name__ == "__main__":
    main()

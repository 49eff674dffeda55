"""Data-parallel training of a small MLP on the scikit-learn digits data set.

The script uses PyTorch DistributedDataParallel on CPU with the gloo backend.
The digits data set (1797 8x8 images, 10 classes) ships with scikit-learn, so
nothing is downloaded.

Ways to launch it:

* With torchrun, e.g. two "nodes" with one process each::

      torchrun --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \\
          --rdzv_endpoint=127.0.0.1:29611 --rdzv_id=digits train.py

  (run the same command on both nodes).

* As plain processes, with the rendezvous variables set by hand::

      MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 python train.py
      MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 python train.py

* As a single process without any of those variables: ``python train.py``.
  No process group is created then; the model is trained without DDP.

Every rank trains on its own shard of the training set (DistributedSampler)
and evaluates its own shard of the test set; losses and accuracy counts are
summed across ranks with all_reduce. Rank 0 prints one line per epoch and the
final test accuracy, and, with ``--output PATH``, writes them as JSON.

With ``--checkpoint DIR`` (a folder every rank sees: the job's volume), rank 0
saves the model and optimizer after each epoch, and a restarted run resumes
from there: ``T9K_JOBS_RESTART_ATTEMPT`` (set by t9k-jobs in every container,
0 on the first run) above 0 tells a restart from a new job, whose old
checkpoint is ignored (docs/hangs.md). ``--pace S`` makes each epoch last at
least S seconds, for rehearsals of failures mid-run (``--inject``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import NoReturn

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="DDP training on sklearn digits")
    parser.add_argument("--epochs", type=int, default=15, help="number of epochs (default: 15)")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="per-process batch size (default: 32)"
    )
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default: 3e-3)")
    parser.add_argument("--hidden", type=int, default=128, help="hidden layer width (default: 128)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--output", type=Path, default=None, help="rank 0 writes final metrics as JSON here"
    )
    parser.add_argument(
        "--checkpoint", type=Path, default=None, help="folder of the checkpoint (resumed on a restart)"
    )
    parser.add_argument("--pace", type=float, default=0.0, help="least seconds per epoch (default: 0)")
    return parser.parse_args(argv)


def resume(
    path: Path | None, model: nn.Module, optimizer: torch.optim.Optimizer, distributed: bool
) -> int:
    """The first epoch to run: 1, or the one after the checkpoint's when this is a restart
    and rank 0 finds one; every rank loads the same file. A restart: any rank's container was
    restarted (T9K_JOBS_RESTART_ATTEMPT > 0) or torchrun restarted its worker in place
    (TORCHELASTIC_RESTART_COUNT > 0); a new job ignores an old checkpoint."""
    attempt = int(os.environ.get("T9K_JOBS_RESTART_ATTEMPT", "0"))
    restarted = attempt > 0 or int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0
    rank = dist.get_rank() if distributed else 0
    found = rank == 0 and path is not None and (path / "checkpoint.pt").exists()
    votes, have = all_reduce_sum([float(restarted), float(found)], distributed)
    if not (votes and have):
        return 1
    assert path is not None
    state = torch.load(path / "checkpoint.pt", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    print(f"attempt {attempt}: resumed from {path / 'checkpoint.pt'} after epoch {state['epoch']}", flush=True)
    return int(state["epoch"]) + 1


def save(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int) -> None:
    """Write the checkpoint whole (a new file renamed over the old): a kill mid-write leaves the last one."""
    path.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
    torch.save(state, path / "checkpoint.pt.new")
    os.replace(path / "checkpoint.pt.new", path / "checkpoint.pt")


def setup_distributed() -> tuple[int, int, int, bool]:
    """Return (rank, world_size, local_rank, distributed) and join the process group.

    The process group is initialised from the environment (``env://``):
    torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT;
    a hand-started process needs at least the first two plus MASTER_*.
    Without RANK and WORLD_SIZE the script runs as a single process.
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return 0, 1, 0, False
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dist.init_process_group(backend="gloo", init_method="env://")
    return rank, world_size, local_rank, True


def all_reduce_sum(values: list[float], distributed: bool) -> list[float]:
    """Sum a few scalars over all ranks (identity when not distributed)."""
    tensor = torch.tensor(values, dtype=torch.float64)
    if distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def load_data(seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Deterministic 80/20 stratified split, features standardised on the train set."""
    features, labels = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.2, random_state=seed, stratify=labels
    )
    scaler = StandardScaler().fit(x_train)
    x_train = scaler.transform(x_train).astype(np.float32)
    x_test = scaler.transform(x_test).astype(np.float32)
    train = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train).long())
    test = TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test).long())
    return train, test


def build_model(hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def evaluate(
    model: nn.Module, test: TensorDataset, rank: int, world_size: int, distributed: bool
) -> float:
    """Accuracy on the whole test set; each rank scores every world_size-th sample."""
    x_test, y_test = test.tensors
    x_shard, y_shard = x_test[rank::world_size], y_test[rank::world_size]
    model.eval()
    with torch.no_grad():
        correct = (model(x_shard).argmax(dim=1) == y_shard).sum().item()
    model.train()
    correct, total = all_reduce_sum([correct, len(y_shard)], distributed)
    return correct / total


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
    torch.set_num_threads(1)  # one process per core; avoid oversubscription
    start = time.monotonic()

    rank, world_size, local_rank, distributed = setup_distributed()
    is_main = rank == 0
    if is_main:
        mode = "distributed (gloo)" if distributed else "single process"
        print(f"{mode}: world_size {world_size}", flush=True)
    else:
        print(f"rank {rank} of {world_size} joined on {socket.gethostname()}", flush=True)

    torch.manual_seed(args.seed)  # same initial weights on every rank
    train, test = load_data(args.seed)
    sampler = DistributedSampler(
        train, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed
    )
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)

    model = build_model(args.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    first = resume(args.checkpoint, model, optimizer, distributed)
    net = model
    if distributed:
        net = DistributedDataParallel(model)  # CPU: no device_ids
    loss_fn = nn.CrossEntropyLoss()

    accuracy = 0.0
    mean_loss = float("nan")
    for epoch in range(first, args.epochs + 1):
        began = time.monotonic()
        sampler.set_epoch(epoch)  # a different shuffle per epoch, same on all ranks
        loss_sum, sample_count = 0.0, 0
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(net(inputs), targets)
            loss.backward()  # DDP averages the gradients across ranks here
            optimizer.step()
            loss_sum += loss.item() * len(targets)
            sample_count += len(targets)

        loss_sum, sample_count = all_reduce_sum([loss_sum, sample_count], distributed)
        mean_loss = loss_sum / sample_count
        accuracy = evaluate(net, test, rank, world_size, distributed)
        if is_main:
            print(
                f"epoch {epoch}/{args.epochs} loss {mean_loss:.4f} test_accuracy {accuracy:.4f}",
                flush=True,
            )
            if args.checkpoint is not None:
                save(args.checkpoint, model, optimizer, epoch)
        time.sleep(max(0.0, args.pace - (time.monotonic() - began)))

    elapsed = time.monotonic() - start
    if is_main:
        print(f"final test_accuracy {accuracy:.4f}", flush=True)
        if args.output is not None:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            metrics = {
                "test_accuracy": accuracy,
                "final_loss": mean_loss,
                "world_size": world_size,
                "epochs": args.epochs,
                "seconds": round(elapsed, 3),
            }
            args.output.write_text(json.dumps(metrics, indent=2) + "\n")

    if distributed:
        dist.barrier()  # every rank is done; the group is left to the process's end (leave())
    leave(0)


if __name__ == "__main__":
    main()

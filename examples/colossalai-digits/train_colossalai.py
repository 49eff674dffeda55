"""ColossalAI Booster training of a small MLP on the scikit-learn digits data set, on CPU.

ColossalAI's Booster with its data-parallel TorchDDPPlugin: the plugin wraps the model in
PyTorch DDP, shards the data with a DistributedSampler and leaves the optimizer as it is.
``colossalai.launch_from_torch`` joins the process group from the variables torchrun sets;
ColossalAI's CPU accelerator (picked by itself when there is no GPU) uses gloo. The digits
data set ships with scikit-learn, so nothing is downloaded.

Ways to launch it (run from this folder):

* ``colossalai run`` over ssh, one process on each host of a hostfile (one host a line)::

      colossalai run --nproc_per_node=1 --hostfile=hostfile \\
          --master_addr=<first host> --master_port=29800 train_colossalai.py

* ``colossalai run`` on this host only (no hostfile: it runs torchrun here, without ssh)::

      colossalai run --nproc_per_node=2 --master_port=29800 train_colossalai.py

* With torchrun (what ``colossalai run`` runs on each host), or as a single process:
  ``python train_colossalai.py``.

Rank 0 prints one line per epoch and ``final test_accuracy X``; with ``--output PATH`` it
also writes the metrics as JSON. The exit status is non-zero when training fails, or when
``--min-accuracy`` is given and the final accuracy is below it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import NoReturn

# ColossalAI warns on import about optional CUDA kernels (apex, flash attention) it cannot use on CPU.
warnings.filterwarnings("ignore", message=r".*(apex|fused|flash).*", category=UserWarning)
warnings.filterwarnings("ignore", message=r".*broadcast_buffers.*", category=FutureWarning)
# torch 2.5 starts a pool of compile workers when anything imports torch._inductor.async_compile
# (colossalai's imports do) and triton is installed; this script compiles nothing, and with the pool
# a rank was seen hanging at exit after training (docs/decisions.md, "One locked stack").
os.environ.setdefault("TORCH_WARM_POOL", "0")

import colossalai  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from colossalai.accelerator import get_accelerator  # noqa: E402
from colossalai.booster import Booster  # noqa: E402
from colossalai.booster.plugin import TorchDDPPlugin  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="ColossalAI Booster (TorchDDPPlugin) on sklearn digits (CPU)"
    )
    parser.add_argument("--epochs", type=int, default=15, help="number of epochs (default: 15)")
    parser.add_argument("--batch-size", type=int, default=32, help="per-process batch size (default: 32)")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default: 3e-3)")
    parser.add_argument("--hidden", type=int, default=128, help="hidden layer width (default: 128)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
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
    return parser.parse_args(argv)


def load_data(seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Deterministic stratified 80/20 split, features standardised on the training part."""
    features, labels = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.2, random_state=seed, stratify=labels
    )
    scaler = StandardScaler().fit(x_train)

    def to_dataset(x: np.ndarray, y: np.ndarray) -> TensorDataset:
        features = torch.from_numpy(scaler.transform(x).astype(np.float32))
        return TensorDataset(features, torch.from_numpy(y).long())

    return to_dataset(x_train, y_train), to_dataset(x_test, y_test)


def sum_over_ranks(values: list[float]) -> list[float]:
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


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
        # Started by hand: make a world of one so that the same code path runs.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        defaults = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
        for name, value in {**defaults, "MASTER_PORT": str(port)}.items():
            os.environ.setdefault(name, value)
    # The accelerator (cuda, npu, else cpu) decides the backend: gloo on CPU.
    colossalai.launch_from_torch(seed=args.seed, verbose=False)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0
    if is_main:
        print(
            f"colossalai {colossalai.__version__} torch {torch.__version__}: world_size {world_size}, "
            f"accelerator {get_accelerator().name}, backend {dist.get_backend()}, plugin TorchDDPPlugin",
            flush=True,
        )
    else:
        print(f"rank {rank} of {world_size} joined on {socket.gethostname()} (pid {os.getpid()})", flush=True)

    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    train, test = load_data(args.seed)
    plugin = TorchDDPPlugin()
    booster = Booster(plugin=plugin)
    loader = plugin.prepare_dataloader(train, batch_size=args.batch_size, shuffle=True, seed=args.seed)

    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model, optimizer, criterion, loader, _ = booster.boost(model, optimizer, nn.CrossEntropyLoss(), loader)

    accuracy, mean_loss = 0.0, float("nan")
    for epoch in range(1, args.epochs + 1):
        loader.sampler.set_epoch(epoch)  # a different shuffle per epoch, the same on every rank
        loss_sum, seen = 0.0, 0
        for inputs, targets in loader:
            loss = criterion(model(inputs), targets)
            booster.backward(loss, optimizer)  # DDP averages the gradients over the ranks here
            optimizer.step()
            optimizer.zero_grad()
            loss_sum += loss.item() * len(targets)
            seen += len(targets)
        loss_sum, seen = sum_over_ranks([loss_sum, seen])
        mean_loss = loss_sum / seen

        x_test, y_test = test.tensors
        shard = slice(rank, None, world_size)
        model.eval()
        with torch.no_grad():
            correct = (model(x_test[shard]).argmax(dim=1) == y_test[shard]).sum().item()
        model.train()
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

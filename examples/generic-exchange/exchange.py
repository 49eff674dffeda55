"""All-to-all exchange over plain TCP, for a GenericJob with N ``worker`` replicas.

Every rank listens on the port of its own entry in ``--peers``, sends one JSON
message ``{"from": rank, "value": rank * rank + 1}`` to every other rank, and
waits for exactly one message from each peer. The run succeeds (exit code 0)
when every rank received ``world_size - 1`` messages with the expected values;
it fails (exit code 1) on any mismatch, bad message, or when ``--timeout``
seconds pass before the exchange is complete.

Only the Python standard library is used.

Usage (three ranks on one machine, one shell each)::

    python exchange.py --rank 0 --world-size 3 \\
        --peers 127.0.0.1:40001,127.0.0.1:40002,127.0.0.1:40003
    python exchange.py --rank 1 --world-size 3 \\
        --peers 127.0.0.1:40001,127.0.0.1:40002,127.0.0.1:40003
    python exchange.py --rank 2 --world-size 3 \\
        --peers 127.0.0.1:40001,127.0.0.1:40002,127.0.0.1:40003

``peers[i]`` is the ``host:port`` that rank ``i`` listens on. A rank binds to
the host of its own entry and falls back to ``0.0.0.0`` when that host cannot
be bound (for example a Kubernetes service name that resolves to a virtual IP).

Wire protocol: the sender writes one JSON object terminated by ``\\n``; the
receiver answers ``ok\\n`` once it has parsed the message, so a sender knows
its message was delivered before it moves on.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

CONNECT_RETRY_WINDOW_S = 60.0  # how long to keep retrying one peer
RETRY_INTERVAL_S = 0.5
IO_TIMEOUT_S = 10.0  # per-connection read/write timeout
MAX_MESSAGE_BYTES = 64 * 1024


def log(rank: int, message: str) -> None:
    print(f"[rank {rank}] {message}", flush=True)


def expected_value(rank: int) -> int:
    return rank * rank + 1


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad peer address {text!r}, expected host:port")
    return host.strip("[]"), int(port)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, required=True, help="this process's rank")
    parser.add_argument("--world-size", type=int, required=True, help="number of ranks")
    parser.add_argument(
        "--peers",
        required=True,
        help="comma-separated host:port list; entry i is the address of rank i",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=90.0,
        help="overall time limit in seconds (default: 90)",
    )
    args = parser.parse_args(argv)

    try:
        args.peers = [parse_address(p) for p in args.peers.split(",") if p.strip()]
    except ValueError as exc:
        parser.error(str(exc))
    if args.world_size < 1:
        parser.error("--world-size must be at least 1")
    if len(args.peers) != args.world_size:
        parser.error(
            f"--peers has {len(args.peers)} entries but --world-size is {args.world_size}"
        )
    if not 0 <= args.rank < args.world_size:
        parser.error(f"--rank must be in [0, {args.world_size - 1}]")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    return args


def recv_line(conn: socket.socket) -> bytes:
    """Read up to and including the first newline (or EOF)."""
    chunks = []
    size = 0
    while True:
        chunk = conn.recv(4096)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            break
        if size > MAX_MESSAGE_BYTES:
            raise ValueError("message too large")
    return b"".join(chunks).split(b"\n", 1)[0]


class Receiver:
    """Accepts connections in a background thread and collects peer messages."""

    def __init__(self, rank: int, world_size: int, address: tuple[str, int]) -> None:
        self.rank = rank
        self.world_size = world_size
        self.messages: dict[int, int] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.complete = threading.Event()
        self.failed = threading.Event()
        self.stopping = threading.Event()
        self.sock = self._bind(address)
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        if world_size == 1:
            self.complete.set()

    def _bind(self, address: tuple[str, int]) -> socket.socket:
        host, port = address
        last_error: OSError | None = None
        for bind_host in (host, "0.0.0.0"):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((bind_host, port))
                sock.listen(max(self.world_size, 16))
            except OSError as exc:
                sock.close()
                last_error = exc
                log(self.rank, f"cannot bind {bind_host}:{port} ({exc})")
                continue
            sock.settimeout(0.5)  # so the accept loop can notice stop()
            log(self.rank, f"listening on {bind_host}:{port}")
            return sock
        raise OSError(f"cannot listen on port {port}: {last_error}")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=2.0)
        self.sock.close()

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self.stopping.is_set():
                    return
                time.sleep(0.1)
                continue
            threading.Thread(
                target=self._handle, args=(conn, peer), daemon=True
            ).start()

    def _fail(self, message: str) -> None:
        log(self.rank, f"error: {message}")
        with self.lock:
            self.errors.append(message)
        self.failed.set()  # stop sending
        self.complete.set()  # wake the main thread: the run has failed

    def _handle(self, conn: socket.socket, peer: tuple) -> None:
        with conn:
            conn.settimeout(IO_TIMEOUT_S)
            try:
                raw = recv_line(conn)
                if not raw.strip():
                    return  # connected and closed without data (e.g. a probe)
                msg = json.loads(raw.decode("utf-8"))
                sender, value = msg["from"], msg["value"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self._fail(f"bad message from {peer[0]}:{peer[1]}: {exc}")
                return
            if not isinstance(sender, int) or not isinstance(value, int):
                self._fail(f"bad message from {peer[0]}:{peer[1]}: {msg!r}")
                return
            if not 0 <= sender < self.world_size or sender == self.rank:
                self._fail(f"message from unexpected rank {sender}")
                return
            if value != expected_value(sender):
                self._fail(
                    f"rank {sender} sent value {value}, expected {expected_value(sender)}"
                )
                return
            with self.lock:
                # A repeated message (the sender retried after a lost ack) is
                # harmless: it carries the same, already validated value.
                self.messages[sender] = value
                done = len(self.messages) == self.world_size - 1
            try:
                conn.sendall(b"ok\n")
            except OSError:
                pass  # the sender will retry and get a fresh acknowledgement
            # Signal completion only after acknowledging, so the main thread
            # cannot exit before the last sender got its reply.
            if done:
                self.complete.set()


def send_to_peer(
    rank: int,
    peer_rank: int,
    address: tuple[str, int],
    deadline: float,
    abort: threading.Event,
) -> bool:
    """Deliver this rank's message to one peer, retrying until acknowledged.

    Gives up when the retry window or the overall deadline has passed, or when
    ``abort`` is set (the run has already failed).
    """
    payload = (json.dumps({"from": rank, "value": expected_value(rank)}) + "\n").encode()
    window_end = min(deadline, time.monotonic() + CONNECT_RETRY_WINDOW_S)
    attempts = 0
    last_error: Exception | None = None
    while time.monotonic() < window_end and not abort.is_set():
        attempts += 1
        remaining = window_end - time.monotonic()
        try:
            with socket.create_connection(
                address, timeout=min(IO_TIMEOUT_S, max(remaining, 0.1))
            ) as conn:
                conn.sendall(payload)
                reply = recv_line(conn)
            if reply.strip() == b"ok":
                log(rank, f"sent to rank {peer_rank} at {address[0]}:{address[1]}")
                return True
            # No acknowledgement (peer went away mid-exchange): try again.
            last_error = ConnectionError(f"unexpected reply {reply!r}")
        except OSError as exc:  # refused, unresolvable host, reset, timeout...
            last_error = exc
        abort.wait(min(RETRY_INTERVAL_S, max(window_end - time.monotonic(), 0)))
    if abort.is_set():
        return False
    log(
        rank,
        f"error: could not deliver to rank {peer_rank} at {address[0]}:{address[1]} "
        f"after {attempts} attempts: {last_error}",
    )
    return False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, world_size = args.rank, args.world_size
    deadline = time.monotonic() + args.timeout

    try:
        receiver = Receiver(rank, world_size, args.peers[rank])
    except OSError as exc:
        log(rank, f"error: {exc}")
        return 1
    receiver.start()

    ok = True
    try:
        # Send to peers in rank order starting after ourselves, so ranks do not
        # all queue up on the same (possibly not yet started) peer.
        for offset in range(1, world_size):
            peer_rank = (rank + offset) % world_size
            if not send_to_peer(
                rank, peer_rank, args.peers[peer_rank], deadline, receiver.failed
            ):
                ok = False
                break

        if ok and not receiver.complete.wait(timeout=max(deadline - time.monotonic(), 0)):
            with receiver.lock:
                got = sorted(receiver.messages)
            missing = sorted(set(range(world_size)) - set(got) - {rank})
            log(rank, f"error: timed out after {args.timeout:g}s waiting for ranks {missing}")
            ok = False
    finally:
        receiver.stop()

    with receiver.lock:
        messages = dict(receiver.messages)
        errors = list(receiver.errors)
    if errors:
        ok = False
    if ok and sorted(messages) != [r for r in range(world_size) if r != rank]:
        log(rank, f"error: got messages from {sorted(messages)}")
        ok = False
    if not ok:
        return 1

    received_sum = sum(messages.values())
    print(f"rank {rank} received from {sorted(messages)}: sum={received_sum}", flush=True)
    if rank == 0:
        total = received_sum + expected_value(rank)
        expected_total = sum(expected_value(r) for r in range(world_size))
        if total != expected_total:
            log(rank, f"error: total {total} != expected {expected_total}")
            return 1
        print(f"exchange ok: sum of all values = {total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

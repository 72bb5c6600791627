"""The `serve --workers N` process: holds the store's lock, starts N workers, restarts one that dies.

Workers are separate interpreters (`python -m kafkacompat serve` with
`worker_of` set and every setting passed in the environment), so each has
its own core and its own event loop. They write to the supervisor's stderr:
one log. The supervisor itself serves nothing and opens no store; it keeps
what must be decided once for all of them:

* the data dir's lock (a second broker must not open the store), held for
  as long as any worker runs, the supervisor's or not: each worker inherits
  its descriptor; a worker refuses to open the store unless it is held
  (storage/disk/shared.py);
* the leader epochs: every worker start gets one above all earlier ones,
  recorded in workers.json before the worker starts, so the others
  advertise its partitions under the epoch it leads them with;
* the clean-shutdown marker: removed before the workers start (each checks
  its partitions' tails as it opens them) and written back only when every
  worker stopped cleanly;
* the listening sockets: bound here once and handed to each worker start,
  so while a worker restarts its port is still open and clients that
  connect wait in the socket's queue for it (they were refused, and
  librdkafka's reconnect back-off doubled each time, up to seconds after
  the worker was back); when --host names several addresses (localhost:
  IPv4 and IPv6), each worker binds its own as before; and each worker's
  Unix socket in the data dir, where the other workers ask it as the broker
  itself rather than as an anonymous client (channel.py);
* the spare (`--spare-worker`, on by default): one more process, started once
  the workers serve, that has loaded the broker and waits on its standard
  input. A worker that dies is restarted in it (its role written there), so
  its partitions, its coordinators and, for worker 0, the catalog are
  served again after a store open instead of a whole interpreter start;
  a new spare is started once that worker serves.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import logging
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

from ..config import SETTINGS, BrokerConfig, env_name, setting_kind
from ..storage.disk import layout
from ..storage.disk.chain import highest_recorded_epoch
from ..storage.disk.files import fsync_dir, write_atomic
from ..storage.disk.format import NewerFormatError, check_format, read_epoch, read_identity, store_state
from ..storage.errors import StorageFullError
from . import channel
from .role import SPARE, WorkerRole
from .view import EPOCHS_COPY, EPOCHS_FILE, epochs_record, read_record

log = logging.getLogger("kafkacompat.workers")
START_TIMEOUT_S = 120.0  # a worker that does not serve by then is a failed start
STOP_TIMEOUT_S = 30.0  # a worker still running this long after SIGTERM is killed
RESTART_BACKOFF_S = 1.0  # a worker that died within this long of its start waits this long before the next
# what the log says of a worker's start and of its serving again after one (fault campaigns and benches read it)
WORKER_STARTED = re.compile(r"worker (?P<index>\d+) started \(pid (?P<pid>\d+)")
WORKER_AGAIN = re.compile(r"worker (?P<index>\d+) serves again")
LISTEN_BACKLOG = 100  # connections queued while a worker (re)starts; asyncio's default for a broker's own
SPARE_DELAY_S = 2.0  # a new spare starts this long after a restarted worker serves (not while it recovers)


class SupervisorError(Exception):
    """The workers cannot start: `str()` says why; `status` is serve's exit code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclasses.dataclass
class _Spare:
    process: subprocess.Popen
    ready_fd: int  # the read end of the readiness pipe it will announce itself on as a worker
    child_fd: int  # the write end's number in the spare (pass_fds keeps it), named in the role it is given


@dataclasses.dataclass
class _Worker:
    index: int
    process: subprocess.Popen
    ready_fd: int  # the read end of its readiness pipe; -1 once it announced itself
    started: float
    epoch: int


class Supervisor:
    def __init__(self, config: BrokerConfig, count: int) -> None:
        self.config = config
        self.count = count
        self.root = os.path.abspath(config.store_url)
        self.ports: list[int] = []
        self._listeners: list[socket.socket] = []  # one per worker when --host is one address
        self._channels: list[socket.socket] = []  # each worker's Unix socket (channel.py)
        self.epochs: list[int] = []
        self._next_epoch = 0
        self._workers: list[_Worker | None] = [None] * count
        self._spare: _Spare | None = None
        self._spare_started = 0.0
        self._settled = 0.0  # when a restarted worker last announced it serves
        self._lock_fd = -1
        self._stopping = False

    # start --------------------------------------------------------------------

    def start(self) -> None:
        """Take the lock, settle the epochs and ports, start worker 0 (it creates and repairs the
        shared files) and, once it serves, the others; SupervisorError if any cannot start. SIGTERM and
        SIGINT are taken first: one arriving as "serving" is logged still stops every worker cleanly."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self._take_lock()
        try:
            check_format(os.path.join(self.root, layout.STORE_FILE))
        except NewerFormatError as exc:
            raise SupervisorError(str(exc), 4) from None
        self._next_epoch = highest_epoch_used(self.root) + 1
        self.epochs = [0] * self.count
        marker = os.path.join(self.root, layout.CLEAN_MARKER)
        if os.path.exists(marker):
            os.unlink(marker)
            fsync_dir(self.root)
        self.ports = self._listen() or self._pick_ports()
        self._channels = channel.bind(self.root, self.count)
        for index in range(self.count):
            self._spawn(index)
            self._await_ready(index)
        log.info("%d workers serving on ports %s", self.count, ", ".join(map(str, self.ports)))
        if self.config.spare_worker:
            self._start_spare()

    def _take_lock(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(os.path.join(self.root, layout.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SupervisorError(f"data dir {self.root} is in use by another broker (or by the workers of one "
                                  "whose supervisor was killed, until they stop); stop that broker or choose "
                                  "another --data-dir", 4) from None
        self._lock_fd = fd

    def _listen(self) -> list[int]:
        """Bind and listen on each worker's port, the sockets kept here for every start of that worker;
        [] when --host names more than one address (the workers bind theirs); SupervisorError (exit 3)
        when a port cannot be bound."""
        host = self.config.host
        try:
            addresses = {info[4][:2] for info in socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM,
                                                                   flags=socket.AI_PASSIVE)}
        except socket.gaierror as exc:
            raise SupervisorError(f"cannot listen on {host}: {exc.strerror}; choose another --host", 3) from None
        if len(addresses) != 1:
            return []
        address = next(iter(addresses))[0]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        for index in range(self.count):
            port = self.config.port + index if self.config.port else 0
            try:
                self._listeners.append(socket.create_server((address, port), family=family, backlog=LISTEN_BACKLOG))
            except OSError as exc:
                self._close_listeners()
                why = "the address is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
                raise SupervisorError(f"cannot listen on {host}:{port} (worker {index}): {why}; stop what listens "
                                      "there or choose another --port", 3) from None
        return [sock.getsockname()[1] for sock in self._listeners]

    def _close_listeners(self) -> None:
        for sock in (*self._listeners, *self._channels):
            sock.close()
        self._listeners, self._channels = [], []
        channel.unlink(self.root, self.count)

    def _listen_fd(self, index: int) -> int:
        return self._listeners[index].fileno() if self._listeners else -1

    def _channel_fd(self, index: int) -> int:
        return self._channels[index].fileno() if self._channels else -1

    def _pick_ports(self) -> list[int]:
        if self.config.port != 0:
            return [self.config.port + i for i in range(self.count)]
        held = []
        try:
            for _ in range(self.count):  # all bound at once: the kernel gives distinct free ports
                sock = socket.socket()
                sock.bind((self.config.host, 0))
                held.append(sock)
            return [sock.getsockname()[1] for sock in held]
        finally:
            for sock in held:
                sock.close()

    def _spawn(self, index: int) -> None:
        epoch = self._next_epoch
        self._next_epoch += 1
        self.epochs[index] = epoch
        write_epochs(self.root, self.epochs)
        if (taken := self._take_spare(index, epoch)) is not None:
            process, read_end = taken
            how = "; the spare takes its place"
        else:
            read_end, write_end = os.pipe()
            role = WorkerRole(index, self.count, epoch, tuple(self.ports), write_end, self._listen_fd(index),
                              self._channel_fd(index))
            process = self._start_process(worker_environment(self.config, role.spec()), write_end,
                                          subprocess.DEVNULL, (self._listen_fd(index), self._channel_fd(index)))
            how = ""
        self._workers[index] = _Worker(index, process, read_end, time.monotonic(), epoch)
        log.info("worker %d started (pid %d, port %d, leader epoch %d%s)", index, process.pid, self.ports[index],
                 epoch, how)

    def _start_process(self, env: dict[str, str], write_end: int, stdin: int,
                       listen_fds: tuple[int, ...]) -> subprocess.Popen:
        # the lock's descriptor goes with it: the data dir stays locked until the last worker is gone, so a
        # new command cannot start while the workers of a supervisor killed with -9 still run (they stop on
        # their own within a second or two; a paused one only once resumed)
        process = subprocess.Popen([sys.executable, "-m", "kafkacompat", "serve"], env=env,
                                   pass_fds=(write_end, self._lock_fd, *(fd for fd in listen_fds if fd >= 0)),
                                   stdin=stdin,
                                   start_new_session=True)  # signals come from here
        os.close(write_end)
        return process

    def _start_spare(self) -> None:
        read_end, write_end = os.pipe()
        process = self._start_process(worker_environment(self.config, SPARE), write_end, subprocess.PIPE,
                                      tuple(s.fileno() for s in (*self._listeners, *self._channels)))  # any place
        self._spare = _Spare(process, read_end, write_end)
        self._spare_started = time.monotonic()
        log.info("spare worker started (pid %d): it takes the place of the next worker to die", process.pid)

    def _take_spare(self, index: int, epoch: int) -> tuple[subprocess.Popen, int] | None:
        """Worker `index` started in the spare (its role written to the spare's standard input): the spare's
        process and readiness pipe; None when there is no live spare (the caller starts a fresh one)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        role = WorkerRole(index, self.count, epoch, tuple(self.ports), spare.child_fd, self._listen_fd(index),
                          self._channel_fd(index))
        try:
            assert spare.process.stdin is not None
            spare.process.stdin.write(f"{role.spec()}\n".encode())
            spare.process.stdin.close()
        except OSError:  # it died (its exit is reaped below): a fresh process instead
            spare.process.kill()
            spare.process.wait()
            os.close(spare.ready_fd)
            return None
        return spare.process, spare.ready_fd

    def _await_ready(self, index: int) -> None:
        worker = self._workers[index]
        assert worker is not None
        ready, _, _ = select.select([worker.ready_fd], [], [], START_TIMEOUT_S)
        announced = bool(ready) and os.read(worker.ready_fd, 1) == b"r"
        os.close(worker.ready_fd)
        worker.ready_fd = -1
        if not announced:
            status = worker.process.wait() if not ready or worker.process.poll() is not None else None
            self.stop()
            raise SupervisorError(f"worker {index} did not start (exit status {status}); see its message above",
                                  status or 1)

    # run ------------------------------------------------------------------------

    def run(self) -> int:
        """Restart workers that die until SIGTERM or SIGINT; then stop them all. Returns serve's status."""
        while not self._stopping:
            self._watch()
            time.sleep(0.05)
        return self.stop()

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _watch(self) -> None:
        self._keep_a_spare()
        for worker in self._workers:
            if worker is None:
                continue
            if worker.ready_fd >= 0 and select.select([worker.ready_fd], [], [], 0)[0]:
                if os.read(worker.ready_fd, 1) == b"r":
                    log.info("worker %d serves again, %.2f s after its restart", worker.index,
                             time.monotonic() - worker.started)
                    self._settled = time.monotonic()
                os.close(worker.ready_fd)
                worker.ready_fd = -1
            status = worker.process.poll()
            if status is None or self._stopping:
                continue
            log.warning("worker %d (pid %d) exited with status %d; restarting it", worker.index,
                        worker.process.pid, status)
            if worker.ready_fd >= 0:
                os.close(worker.ready_fd)
            if time.monotonic() - worker.started < RESTART_BACKOFF_S:
                time.sleep(RESTART_BACKOFF_S)  # a worker that cannot start must not spin
            self._spawn(worker.index)

    def _keep_a_spare(self) -> None:
        """A spare that died is let go; a new one is started once every worker has served for SPARE_DELAY_S
        (it would take their core while they start and their clients come back) and at most once per
        RESTART_BACKOFF_S (one that cannot start must not spin)."""
        if self._spare is not None and self._spare.process.poll() is not None:
            log.warning("the spare worker (pid %d) exited with status %d", self._spare.process.pid,
                        self._spare.process.returncode)
            self._stop_spare()
        if (self._spare is None and self.config.spare_worker and not self._stopping
                and all(w is not None and w.ready_fd < 0 for w in self._workers)
                and time.monotonic() - self._spare_started >= RESTART_BACKOFF_S
                and time.monotonic() - self._settled >= SPARE_DELAY_S):
            self._start_spare()

    def _stop_spare(self) -> None:
        """Close the spare's pipes (it stops at the end of its input) and wait for it."""
        spare, self._spare = self._spare, None
        if spare is None:
            return
        if spare.process.stdin is not None:
            try:
                spare.process.stdin.close()
            except OSError:
                pass
        try:
            spare.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            spare.process.kill()
            spare.process.wait()
        os.close(spare.ready_fd)

    # stop -------------------------------------------------------------------------

    def stop(self) -> int:
        """SIGTERM every worker, wait for them (killing the late), mark the store clean if all stopped
        cleanly, let go of the lock. Returns 0, or 1 when a worker did not stop cleanly."""
        self._stopping = True
        self._stop_spare()
        running = [w for w in self._workers if w is not None and w.process.poll() is None]
        for worker in running:
            worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        clean = True
        for worker in [w for w in self._workers if w is not None]:
            try:
                status = worker.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker %d did not stop within %.0f s; killing it", worker.index, STOP_TIMEOUT_S)
                worker.process.kill()
                status = worker.process.wait()
            clean = clean and status == 0
            if worker.ready_fd >= 0:
                os.close(worker.ready_fd)
                worker.ready_fd = -1
        self._workers = [None] * self.count
        if self._lock_fd >= 0:
            try:
                self._record_epoch()
                if clean:
                    write_atomic(os.path.join(self.root, layout.CLEAN_MARKER), b"")
            except StorageFullError as exc:  # as a single broker on a full disk: the next start checks every tail
                log.warning("%s; the store is left unmarked, so the next start checks its partitions' tails", exc)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
        self._close_listeners()
        return 0 if clean else 1

    def _record_epoch(self) -> None:
        """store.json's epoch raised to the highest any worker led under (worker 0 wrote its own): a
        single broker opening the store next leads above every epoch in the partitions."""
        store_file = os.path.join(self.root, layout.STORE_FILE)
        stored, problem = read_epoch(store_file)
        store_id, settings = read_identity(store_file)
        highest = max(self.epochs, default=0)
        if problem is None and store_id is not None and settings is not None and highest > stored:
            write_atomic(store_file, store_state(highest, str(store_id), settings))


def highest_epoch_used(root: str) -> int:
    """The highest leader epoch any worker or broker may have led under: store.json's, the epochs in
    workers.json and in its copy, and the highest the partitions' manifests record (the floor when both
    records are lost). A record that is garbled or torn is logged and left out: the other is whole."""
    stored, _problem = read_epoch(os.path.join(root, layout.STORE_FILE))
    highest = max(stored, highest_recorded_epoch(root))
    for name in (EPOCHS_FILE, EPOCHS_COPY):
        epochs, problem = read_record(os.path.join(root, name))
        if problem is not None:
            log.warning("%s %s; leader epochs continue above the other records", os.path.join(root, name), problem)
        highest = max([highest, *(epochs or [])])
    return highest


EPOCHS_BLOCK = 4096  # workers.json is padded to whole blocks, so it can be rewritten where it is


def write_epochs(root: str, epochs: list[int]) -> None:
    """Record each worker's leader epoch before the worker starts, in workers.json and then in its copy:
    killed while writing one, the other still holds every epoch handed out (the new one is not in use yet)."""
    text = epochs_record(epochs)
    data = text.ljust(-(-len(text) // EPOCHS_BLOCK) * EPOCHS_BLOCK, b" ")  # JSON ignores trailing spaces
    written = 0
    for name in (EPOCHS_FILE, EPOCHS_COPY):
        try:
            _write_padded(os.path.join(root, name), data)
            written += 1
        except StorageFullError as exc:  # a record of an earlier release (unpadded), or none yet
            log.warning("the disk is full: %s could not be written (%s)", os.path.join(root, name), exc)
    if not written:  # as a single broker, the workers start on a full disk
        log.warning("the disk is full: no record of the leader epochs %s could be written; the next start "
                    "leads above the epochs the partitions record", epochs)


def _write_padded(path: str, data: bytes) -> None:
    """Replace `path` atomically. On a full disk the file, padded to whole blocks by every earlier write,
    is overwritten in place, which needs no new block (a start on a full disk died with a traceback here,
    where a single broker starts); a write torn there fails its checksum and the other record is used."""
    try:
        write_atomic(path, data)
    except StorageFullError:
        if not os.path.exists(path) or os.path.getsize(path) < len(data):
            raise
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        log.warning("the disk is full: %s rewritten in place", path)


def worker_environment(config: BrokerConfig, worker_of: str) -> dict[str, str]:
    """The environment a worker starts with: the supervisor's own minus its KAFKACOMPAT_ settings, plus
    every resolved setting as KAFKACOMPAT_<NAME> (flags, file and environment already merged; secrets
    stay out of the command line) and its `worker_of` (a role's spec, or SPARE)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOMPAT_")}
    for name, field in SETTINGS.items():
        value = getattr(config, name)
        if value is None:
            continue
        kind = setting_kind(field)
        if kind == "bool":
            env[env_name(name)] = "true" if value else "false"
        elif kind == "list[str]":
            env[env_name(name)] = ",".join(value)
        else:
            env[env_name(name)] = str(value)
    env[env_name("data_dir")] = os.path.abspath(config.data_dir)
    env[env_name("worker_of")] = worker_of
    env[env_name("workers")] = "1"
    return env


def run_workers(config: BrokerConfig, count: int) -> int:
    """`serve --workers N`: start the workers, restart the dead until SIGTERM/SIGINT, stop them all."""
    supervisor = Supervisor(config, count)
    supervisor.start()
    return supervisor.run()

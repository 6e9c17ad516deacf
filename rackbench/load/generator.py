"""The load-generator seam: what rackbench asks of the program that drives a point. AIPerf is one
(rackbench.load.aiperf); a site registers another under the ``rackbench.load_generators`` entry point group
(rackbench.core.entry_points) and names it in ``profile.load.generator``.

A generator turns a :class:`LoadJob` into a command (:meth:`LoadGenerator.invocation`), and reads what that
command wrote into neutral records (:meth:`LoadGenerator.records`). Running it is shared: its own process group,
a deadline, a status line while it runs, the command kept as a line a shell can take back.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, ClassVar, Protocol

from rackbench.core.secrets import masked_argv
from rackbench.core.timeouts import CLIENT_SETUP_S, INTERRUPT_GRACE_S
from rackbench.server.containers import preamble_done
from rackbench.catalog.points import Point
from rackbench.core import entry_points
from rackbench.core.files import write_atomic
from rackbench.core.poll import Done, PollTimeout, poll
from rackbench.core.processes import stop_group
from rackbench.core.results_folder import CaseFolder
from rackbench.load.records import LoadRecords
from rackbench.recipe.schema.sweep import COMMON_LOAD_KEYS
from rackbench.server.steps import ClientSpec

# profile.load keys every generator honours; anything else a profile sets must be in the generator's `honours`.
COMMON = COMMON_LOAD_KEYS


@dataclass(frozen=True)
class LoadJob:
    """One point's load: where to send it, where its files go, and where it runs (``client``: every path in it as
    the client sees it; the case folder is the same path there and here)."""

    point: Point
    api_url: str
    model_name: str
    metrics_urls: tuple[str, ...]
    case: CaseFolder
    run_id: str
    client: ClientSpec
    trace: Path | None = None             # generated agentic sessions (dataset: generated)
    sessions: int | None = None

    @property
    def cache(self) -> PurePosixPath:
        """What the generator may keep across points (tokenizers, datasets), shared by every point."""
        return PurePosixPath(self.client.cache)


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    env: dict[str, str]
    out_dir: Path                 # what the generator writes (read back by records())
    log: Path
    command_file: Path
    extra: dict[str, Any] = field(default_factory=dict)
    steps: tuple[dict, ...] = ()  # run first where the client runs, in its step (rackbench/tools/preamble.py)


class SetupTimeout(RuntimeError):
    """The client step's preamble did not finish within CLIENT_SETUP_S: the generator never started."""


class Handle(Protocol):
    """A started client: still running (None) or its exit code; interrupt it (SIGINT: the generator ends its run
    and writes its files, AIPerf's cancel path), or stop it."""

    def poll(self) -> int | None: ...

    def interrupt(self) -> None: ...

    def stop(self) -> None: ...


Start = Callable[[dict[str, str], Path], Handle]    # (environment, log) -> the started client


class LocalProcess:
    """A client process of this host: its own process group, output to its log."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path):
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)

    def poll(self) -> int | None:
        return self.popen.poll()

    def interrupt(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        stop_group(self.popen)


class LoadGenerator(ABC):
    """One load generator. ``honours``: the profile.load keys beyond :data:`COMMON` it applies."""

    name: ClassVar[str] = "abstract"
    honours: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, executable: str | None = None):
        self.executable = executable

    @abstractmethod
    def unavailable(self) -> str | None:
        """Why this generator cannot run here (not installed, ...), or None."""

    def explicit(self) -> bool:
        """Whether the executable was chosen for this session (--load-bin): it then wins over the cluster's."""
        return self.executable is not None

    def wrote(self, out_dir: Path) -> bool:
        """Whether the run left anything in its output folder (a client on a node: did its files come back)."""
        return Path(out_dir).is_dir() and any(Path(out_dir).iterdir())

    @abstractmethod
    def command(self, job: LoadJob) -> list[str]:
        """The argv of one point, as it would run; no side effects (``rackbench render`` prints it)."""

    @abstractmethod
    def invocation(self, job: LoadJob) -> Invocation:
        """What runs one point: the command, its environment and files, and the steps that prepare what it needs
        where it runs (nothing is started, nothing written: ``rackbench render`` shows it)."""

    @abstractmethod
    def records(self, out_dir: Path) -> LoadRecords:
        """What the command wrote, as neutral records; never raises on a torn or missing file."""

    def client_check(self, job: LoadJob) -> list[str] | None:
        """The argv (with the client's interpreter) that checks this generator's environment where the client runs,
        answering one JSON line {"problems": [...], "notes": [...]} as preflight's node checks do; None: nothing to
        check beyond the preamble."""
        return None

    def stage(self, profiles: list, cache: Path, models: dict[str, Path],
              drafts: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]] | None:
        """The command (and its environment) that stages what these profiles' points read offline into ``cache``,
        from this host (``models``: model directories this host sees, by profile id; ``drafts``: Hub repo -> the
        folder the servers read it from); None: nothing to stage."""
        return None

    def option_problems(self, options: dict[str, Any]) -> list[str]:
        """Why ``profile.load.options`` is wrong for this generator (one line each)."""
        return [f"load.options.{k}: {self.name} takes no option {k!r}" for k in options]

    def progress(self, out_dir: Path) -> str:
        """A few words on the run so far (the live status line)."""
        return ""

    def run(self, inv: Invocation, timeout: float, on_tick: Callable[[float], None] | None = None,
            tick_s: float = 10.0, start: Start | None = None,
            should_stop: Callable[[float], str | None] | None = None, setup: bool = False) -> int:
        """Run to completion (or stop it after ``timeout`` s: TimeoutExpired). Its exit code. ``start`` starts it
        where the client runs (rackbench.load.client); without one, ``inv.argv`` runs here. ``should_stop(elapsed)``
        returning a reason interrupts it (it then ends its run cleanly, within INTERRUPT_GRACE_S). ``setup``: the
        step runs its preamble first (rackbench/tools/preamble.py: the client's environment, the tokenizer copy);
        ``timeout``, ``elapsed`` and the ticks then count from the generator's own start, and the preamble has
        CLIENT_SETUP_S of its own (a slow first install no longer ends a point before its summary)."""
        inv.log.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(inv.command_file, shlex.join(masked_argv(inv.argv)) + "\n")     # credentials redacted
        if start is None:
            start = lambda env, log: LocalProcess(inv.argv, env, log)      # noqa: E731
        began = time.monotonic()
        handle = start(inv.env, inv.log)
        clock = [None if setup else began]           # when the generator itself started
        next_tick = [tick_s]
        interrupted: list[float] = []

        def probe():
            code = handle.poll()
            if code is not None:
                return Done(code)
            now = time.monotonic()
            if clock[0] is None:
                if preamble_done(inv.log):
                    clock[0] = now
                elif now - began > CLIENT_SETUP_S:
                    handle.stop()
                    raise SetupTimeout(f"the client's setup ran past {CLIENT_SETUP_S} s (its steps: {inv.log})")
                else:
                    return "setting up"
            elapsed = now - clock[0]
            if elapsed > timeout + INTERRUPT_GRACE_S:
                handle.stop()
                raise subprocess.TimeoutExpired(inv.argv, timeout)
            if interrupted:
                if elapsed - interrupted[0] > INTERRUPT_GRACE_S:
                    handle.stop()
                return "ending"
            if should_stop is not None and should_stop(elapsed):
                interrupted.append(elapsed)
                handle.interrupt()
                return "ending"
            if on_tick is not None and elapsed >= next_tick[0]:
                next_tick[0] += tick_s
                on_tick(elapsed)
            return "running"
        try:
            return poll(probe, timeout=(CLIENT_SETUP_S if setup else 0) + timeout + INTERRUPT_GRACE_S, interval=0.05,
                        backoff=1.5, max_interval=min(1.0, tick_s), what=self.name, heard=False)   # it ticks
        except PollTimeout:
            handle.stop()
            raise subprocess.TimeoutExpired(inv.argv, timeout) from None
        except BaseException:
            handle.stop()
            raise


def generator_for(name: str, executable: str | None = None) -> LoadGenerator:
    """The load generator registered as ``name`` (rackbench.core.entry_points)."""
    return entry_points.load(entry_points.LOAD_GENERATORS, name)(executable)

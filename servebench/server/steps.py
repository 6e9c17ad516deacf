"""What a step runs in and where the load generator runs: :class:`Container` (an image, its mounts, its name: with
pyxis an unnamed container and everything written in it vanish when its step ends) and :class:`ClientSpec` (the
client's node, interpreter, command, cache and container, as that node sees them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Container:
    """Where a process's files live: an image (None: the node's own filesystem, shared by every step there), the
    mounts it sees (host path -> path inside), and its name (None: unnamed, gone with its step, writes and all)."""

    image: str | None = None
    mounts: tuple[tuple[str, str], ...] = ()
    name: str | None = None

    def shares_files_with(self, other: "Container") -> bool:
        """Whether what one step writes in its own filesystem another step on the node can read."""
        if self.image is None and other.image is None:
            return True
        return self.name is not None and self.name == other.name

    def describe(self) -> str:
        if self.image is None:
            return "on the node's own filesystem"
        life = f"named {self.name} (kept on the node past the step, and past the job in pyxis's default scope)" \
            if self.name else \
            "unnamed: it and everything written in it vanish with the step"
        mounts = ", ".join(f"{src}:{dst}" for src, dst in self.mounts) or "none"
        return f"in container {self.image} ({life}); mounts {mounts}"


@dataclass(frozen=True)
class ClientSpec:
    """The load generator's place (cluster ``runtime.client``). ``on``: ``head`` (a step on node ``rank``, launched
    through the allocation like a server) or ``login`` (a process of the session's host). Every path is as the
    client sees it."""

    on: str
    node: str
    python: str                              # runs tools/preamble.py and the tools of the client's preamble
    tools: str                               # servebench/tools
    executable: tuple[str, ...] | None       # the generator's command (None: the generator's own)
    cache: str                               # HF_HOME, the staged corpus, AIPerf's dataset mmap cache
    tmpdir: str                              # node-local; AIPerf's IPC sockets go in a folder of their own here
    model: str | None                        # the model directory (its tokenizer); None: a repo id
    container: Container = Container()
    image: str | None = None                 # the step's image when it is not the allocation's
    install: tuple[str, ...] = ()            # pip requirements installed first, in the client's step
    rank: int = 0

    @property
    def preamble(self) -> tuple[dict, ...]:
        """The client's own preamble: its install (before any step of the load generator's)."""
        if not self.install:
            return ()
        return ({"name": "client-install", "argv": [self.python, "-m", "pip", "install", "--no-input",
                                                    *self.install]},)

    def describe(self) -> str:
        where = f"an srun step on the head node {self.node}" if self.on == "head" else "the session's own host"
        return f"{where}, {self.container.describe()}"

"""What a step runs in and where the load generator runs: :class:`Container` (an image, its mounts, its name: with
pyxis an unnamed container and everything written in it vanish when its step ends) and :class:`ClientSpec` (the
client's node, interpreter, command, cache and container, as that node sees them)."""

from __future__ import annotations

from dataclasses import dataclass

from rackbench.tools import CLIENT_ENV, in_folder


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
    tools: str                               # rackbench/tools
    executable: tuple[str, ...] | None       # the generator's command (None: the generator's own)
    cache: str                               # HF_HOME, the staged corpus, AIPerf's dataset mmap cache
    tmpdir: str                              # node-local; AIPerf's IPC sockets go in a folder of their own here
    model: str | None                        # the model directory (its tokenizer); None: a repo id
    container: Container = Container()
    image: str | None = None                 # the step's image when it is not the allocation's
    install: tuple[str, ...] = ()            # pip requirements of the client's environment (made once)
    rank: int = 0
    constraints: str | None = None           # their pins file, as the client sees it
    env_dir: str | None = None               # where that environment is made: the shared cache, named by its inputs

    @property
    def preamble(self) -> tuple[dict, ...]:
        """The client's own preamble: its environment, made by the first step that lacks it (tools/client_env.py),
        before any step of the load generator's."""
        if not self.install:
            return ()
        return ({"name": "client-env", "argv": [self.python, in_folder(self.tools, CLIENT_ENV), str(self.env_dir),
                                                str(self.constraints), *self.install]},)

    @property
    def env(self) -> dict[str, str]:
        """What the client's step adds to the generator's environment: that environment, ahead of the image's."""
        return {"PYTHONPATH": str(self.env_dir)} if self.install else {}

    def describe(self) -> str:
        where = f"an srun step on the head node {self.node}" if self.on == "head" else "the session's own host"
        return f"{where}, {self.container.describe()}"

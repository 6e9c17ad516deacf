"""What preflight says: one finding per problem, where it was seen (a node, or the login node before sbatch), and
what to do about it; a report groups them, one line for a problem every node has alike."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    node: str
    rank: int | None
    kind: str                 # import | flags | object | model | setup | image | gpus | network | infra | preflight
    check: str
    message: str
    fix: str = ""


@dataclass
class Report:
    profile: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    unallocated: bool = False      # the findings stopped it before sbatch: no job was queued

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def kinds(self) -> set[str]:
        return {f.kind for f in self.findings}

    def lines(self) -> list[str]:
        """One line per problem; a problem every node has alike is one line naming the nodes."""
        groups: dict[tuple, list[Finding]] = {}
        for f in self.findings:
            groups.setdefault((f.kind, f.check, f.message, f.fix), []).append(f)
        head = f"{self.profile}: preflight " + ("passed" if self.ok else f"found {len(groups)} problem(s)") + \
            f" in {self.seconds:.0f} s"
        out = [head]
        for (kind, check, message, fix), found in groups.items():
            nodes = ", ".join(f.node if f.rank is None else f"{f.node} (rank {f.rank})" for f in found)
            out.append(f"  {nodes}: {kind}: {check}: {message}" + (f" (fix: {fix})" if fix else ""))
        return out + [f"  note: {n}" for n in dict.fromkeys(self.notes)]

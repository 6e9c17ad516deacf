"""#35: a concurrency of 65536 (its batch-capacity rule waived) passed `matrix` and `render`, then spent over 10
minutes and 2 GB building the generated trace. The dataset-load rule now sizes the trace first."""

import json

import pytest

from rackbench.catalog.load_rules import trace_bytes
from rackbench.catalog.loader import Catalog
from rackbench.load import traces
from rackbench.recipe.schema.sweep import TraceShape
from tests.conftest import edit


@pytest.mark.parametrize("shape", [{}, {"turns": 8, "system_words": 2000}, {"turns": 3, "subagent_rate": 0.0}])
def test_the_size_estimate_is_within_a_quarter_of_the_generated_trace(shape):
    sh = TraceShape(**shape)
    spec = traces.TraceSpec(sessions=100, turns=sh.turns, system_words=sh.system_words, user_words=sh.user_words,
                            tool_words=sh.tool_words, assistant_words=sh.assistant_words,
                            subagent_rate=sh.subagent_rate)
    real = sum(len(json.dumps(line)) + 1 for line in traces.generate(spec))
    assert 0.75 < trace_bytes(sh, 100) / real < 1.25


@pytest.mark.catalog("local")
def test_a_concurrency_whose_trace_cannot_be_built_is_refused_before_anything_runs(recipes):
    edit(recipes / "local/vllm.yaml", "  name: vllm\n",
         "  name: vllm\n  waive: {batch-capacity: 'a stress test of the client, on purpose'}\n")
    text = (recipes / "local/vllm.yaml").read_text()
    (recipes / "local/vllm.yaml").write_text(text.replace("concurrency: [1, 4]", "concurrency: [1, 65536]"))
    _, problems = Catalog.read(recipes)
    said = [str(p) for p in problems if "generated trace would hold" in str(p)]
    assert len(said) == 1 and "vllm.yaml" in said[0] and "concurrency 65536" in said[0], [str(p) for p in problems]
    assert "GiB" in said[0] and "sessions_per_concurrency" in said[0]

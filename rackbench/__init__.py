"""rackbench: a pytest-native benchmark suite for serving large models on GPU clusters.

Data flows one way: recipe -> cases -> allocation -> server -> load -> result -> assertion -> report.
"""

__version__ = "0.1.0"

# The pipeline's folders, first to last: a module imports only from its own folder or the ones before it
# (tests/test_structure.py). tools/ holds stand-alone programs other interpreters run: they import nothing from here.
LAYERS = ("tools", "core", "recipe", "catalog", "cluster", "server", "load", "results", "history", "report",
          "plugin", "cli")

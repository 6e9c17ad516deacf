"""rackbench: a pytest-native benchmark suite for serving large models on GPU clusters.

Data flows one way: recipe -> cases -> allocation -> server -> load -> result -> assertion -> report.
"""

__version__ = "0.1.0"

"""The recipe catalog: every cluster, model and profile of a recipes folder, validated; the sweep's points; the
rules and the capacity model that judge a profile before any GPU hour is spent."""

from rackbench.catalog.loader import Catalog, build_profile, load_clusters, load_models

__all__ = ["Catalog", "build_profile", "load_clusters", "load_models"]

# The suite's pytest hooks and fixtures live in the package so that they are importable,
# tested and documented like the rest of servebench.
pytest_plugins = ["servebench.plugin"]

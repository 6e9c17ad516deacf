# rackbench's pytest plugin loads through its `pytest11` entry point (pip install -e . / scripts/venv);
# this repository adds nothing of its own here.

"""Stand-alone programs servebench runs with *another* interpreter (the serving venv, a cluster image), so they
import nothing from servebench: :data:`FLAG_TABLE` writes flag tables and parses argv with the real parsers;
:data:`PREFLIGHT` checks one allocated node before any server starts."""

from pathlib import Path

FLAG_TABLE = Path(__file__).with_name("flag_table.py")
PREFLIGHT = Path(__file__).with_name("preflight_node.py")

"""What the files say: strict pydantic schemas of every file a user writes, and nothing else.

* :mod:`.srt` - the srt-slurm recipe (srtctl's ``SrtConfig``), unknown keys rejected as srtctl does;
* :mod:`.sweep` - rackbench's own sections: the sweep ``profile:`` and the cluster description;
* :mod:`.model` - model descriptions for the capacity model (every number cited or reasoned).

Nothing here reads a file or interprets a flag; :mod:`rackbench.recipe.layering` parses files into these models and
:mod:`rackbench.recipe.profile` derives the typed views every consumer reads.
"""

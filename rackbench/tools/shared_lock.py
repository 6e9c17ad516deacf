"""A lock file on shared storage that any user of it can take (image imports, the tokenizer cache).

Stand-alone, beside the tools that import it: they run with another interpreter, with this folder on sys.path.
"""

import os


def shared_lock(path) -> int:
    """Open ``path`` so that any user can flock it: read-only (flock needs no more), created 0666 whatever the umask
    (a 0644 one made by the first user could not be opened for writing by the second). Returns the descriptor."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        os.fchmod(fd, 0o666)
    except PermissionError:        # another user's: already 0666, or theirs to mend; reading it is enough
        pass
    return fd

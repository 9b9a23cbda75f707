"""``python -m oracle_rag.cli``: the same command as the ``oracle-rag`` script."""

from . import main

main()

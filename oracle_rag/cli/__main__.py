"""``python -m oracle_rag.cli``: the same command as the ``oracle-rag`` script."""

from oracle_rag.cli import main

main()

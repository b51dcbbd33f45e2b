"""`python -m klineage` is the `klineage` command."""

from klineage.cli import main

main()

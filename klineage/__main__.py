"""`python -m klineage` is the `klineage` command (a cached `klineage gate` is answered before
the command-line framework is imported: klineage/cli_quick.py)."""

from klineage.cli_quick import main

main()

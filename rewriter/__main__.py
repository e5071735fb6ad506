"""``python -m rewriter`` runs the command line."""

from rewriter.cli import main

raise SystemExit(main())

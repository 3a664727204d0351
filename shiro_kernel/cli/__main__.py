"""``python -m shiro_kernel.cli``: the ``shiro`` console script."""

from __future__ import annotations

from . import main

raise SystemExit(main())

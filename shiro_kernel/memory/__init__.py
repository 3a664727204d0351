"""Project memory: notes (``remember``/``recall``/``forget``, seed shiro-neko), named memories
(``memory_read``/``memory_write``, seed samagotchi), bundles, and the ``index.md`` file they share."""

"""State on disk under ``SHIRO_HOME``: atomic files and locks, paths, the clock and ids, session records
with their SQLite index and autosave, and the prompt history; all of it private to its owner."""

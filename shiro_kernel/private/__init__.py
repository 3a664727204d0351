"""Private values: what the user names private (a column anywhere, a variable's column, a whole variable) never
reaches the wire; it leaves as a stable stand-in the model can reason with, and the stand-ins it writes back mean
the real values in the kernel and the views (SPEC §13, "Private values").

* :mod:`.names` — what is private: ``Shiro.private``, the session's changes (``%shiro /private``), the project's
  file (``.shiro/private``) and the administrator's policy;
* :mod:`.values` — the values those names hold in the kernel's namespace now;
* :mod:`.mask` — the stand-ins and the one multi-pattern matcher the boundary scans every request with;
* :mod:`.schema_only` — the administrator's ``values: schema-only``: no tool result that can carry the data's values
  leaves at all.
"""

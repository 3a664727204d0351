"""What the model sees: the system prompt, the provider's history rules and their repairs, pruning of
the wire copy, ``/compact``, kernel-restart awareness and cell-change detection."""

"""What the model sees: the system prompt, the provider's history rules and their repairs, the estimate
and the session's meter, pruning of the wire copy (the ladder, the digest of what it left out, the
image and size limits), ``/compact``, kernel-restart awareness and cell-change detection."""

"""Numbers of an answer, anchored to the tool outputs they came from (issue 28)."""

"""How a turn is shown: the turn log and its static renderings, the blocking text view, the live widget
view, the live controller (background turns, the prompt queue) and the kernel hooks it needs."""

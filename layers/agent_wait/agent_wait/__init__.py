"""agent-wait: human-in-the-loop waits for agents."""

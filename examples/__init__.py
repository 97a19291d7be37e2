"""Sample graphs for the demo and the tests: a refund agent and a free-text question."""

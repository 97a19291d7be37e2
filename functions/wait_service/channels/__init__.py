"""Where people answer and are told besides the HTTP api: Slack, signed routes, webhooks."""

"""``make stress``: the local stack under races, load, crashes and faults, with a table of what held.

Not part of ``make test``: it runs for minutes. Every scenario drives the local stack
(``agent_wait_cli.local.stack.LocalStack``) over HTTP, as clients and humans do; the api handler is
served by the local gateway, which serializes invocations per process as one Lambda instance does.
"""

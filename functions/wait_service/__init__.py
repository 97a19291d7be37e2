"""The deployment's receive path: ledger, api, runner service, resource definitions."""

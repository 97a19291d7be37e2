"""The HTTP api: the resolver and its routes, the checks before it, errors, the OpenAPI document, page
tokens and the inbox page.
"""

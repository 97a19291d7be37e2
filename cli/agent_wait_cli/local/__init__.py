"""The local stack: moto server on 127.0.0.1 standing in for AWS, driving the real handlers."""

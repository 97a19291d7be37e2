"""How the functions configure the boto3 clients they build.

botocore checks every parameter of every request against the service's model before it sends
it. The functions' requests are built by their own code and covered by tests against moto, and
DynamoDB, SQS, SNS, Scheduler and Firehose check each request again when it arrives. The client-side
check was about a tenth of the CPU of a reply through the api (``make bench``, reply throughput);
botocore documents turning it off for performance. A malformed request still fails: in botocore's
serializer, or at the service, which checks every request it receives.
"""

from __future__ import annotations

from botocore.config import Config

CLIENT_CONFIG = Config(parameter_validation=False)

__all__ = ["CLIENT_CONFIG"]

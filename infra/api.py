"""The REST API: the receive path's routes proxied to the api Lambda, validated, throttled and logged."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra import constants
from infra.nag import acknowledge
from wait_service.channels.signing import SIGNED_PREFIX, SIGNED_ROUTES
from wait_service.constants import SLACK_INTERACTIONS_PATH

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

    from infra.config import StackConfig

# (method, path, JSON body required): the routes of the api (docs/internals.md).
ROUTES: tuple[tuple[str, str, bool], ...] = (
    ("POST", "/threads/{thread_id}/runs", True),
    ("GET", "/threads/{thread_id}", False),
    ("GET", "/questions", False),
    ("GET", "/questions/{question_id}", False),
    ("POST", "/questions/{question_id}/reply", True),
    ("POST", "/questions/{question_id}/revoke", True),
    ("GET", "/stats", False),
    ("POST", "/questions/{question_id}/delegate", True),
    ("POST", "/questions/{question_id}/extend", True),
    ("GET", "/openapi.json", False),
    ("GET", "/inbox", False),
    ("GET", "/inbox/config", False),
)
# The inbox page and its sign-in settings take the api's auth like every route (with auth=iam the
# page reaches browsers through `agent-wait inbox`), except when the page signs people in itself
# (auth=jwt with inbox_client_id): a browser must load it before anyone has signed in, so these two
# have no authorizer. They hold no data, only the page and the public app client id and domain;
# every call the page makes carries the person's token.
INBOX_ROUTES: tuple[str, ...] = ("/inbox", "/inbox/config")
INBOX_PAGE_REASON = (
    "No API Gateway authorizer on purpose (auth=jwt): the inbox page and its sign-in settings must load "
    "before the person has signed in; they return no data, only the page and the user pool app client's "
    "public id and hosted UI domain. Every api call the page makes carries the person's Cognito token."
)
# The gateway only checks that a POST body is a JSON object; the handler validates the fields and
# answers with its own status codes (422, 412, ...) in the one error shape.
# Routes with no authorizer at the gateway: the api Lambda verifies them over the raw body (an HMAC
# signature, or Slack's), so the gateway must pass them through untouched, body unvalidated.
UNAUTHENTICATED_AT_GATEWAY_REASON = (
    "No API Gateway authorizer on purpose: every request to this route is authenticated in the api "
    "Lambda, over the raw body, before anything else reads it ({how}); an unsigned or badly signed "
    "request gets 401 there. The callers (systems holding a shared secret, Slack) cannot sign with "
    "SigV4 or present a Cognito token."
)


def _wildcard_parameters(path: str) -> str:
    """``/questions/{question_id}/reply`` → ``/questions/*/reply`` (a resource policy's ARN path)."""
    return "/".join("*" if part.startswith("{") else part for part in path.split("/"))


JSON_OBJECT_SCHEMA = apigw.JsonSchema(schema=apigw.JsonSchemaVersion.DRAFT4, type=apigw.JsonSchemaType.OBJECT)
_ERROR_TEMPLATE = '{"error": "%s", "message": $context.error.messageString}'


class RestApi(Construct):
    """The REST API with IAM (SigV4) or Cognito JWT auth on every method.

    Examples
    --------
    >>> api = RestApi(stack, "Api", config=cfg, handler=api_function.function)  # doctest: +SKIP
    >>> api.url  # https://<id>.execute-api.<region>.amazonaws.com/prod/  # doctest: +SKIP
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StackConfig, handler: lambda_.IFunction
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=logs.RetentionDays[constants.LOG_RETENTION],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=config.stack_name,
            description="agent-wait: start runs, read questions, answer them",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            policy=self._resource_policy(config),
            # The role API Gateway writes execution and access logs with is one setting of the whole
            # account and region: without it the stage's logging fails the first deploy. The stack
            # sets it (context api_gateway_account_role, on by default) and keeps the role and the
            # setting on `cdk destroy`, since every other API of the account logs with it too.
            cloud_watch_role=config.api_gateway_account_role,
            cloud_watch_role_removal_policy=(
                cdk.RemovalPolicy.RETAIN if config.api_gateway_account_role else None
            ),
            deploy_options=apigw.StageOptions(
                stage_name=constants.API_STAGE,
                # Per method (context api_rate / api_burst; docs/performance.md, Scale, sizes them).
                throttling_rate_limit=config.api_rate,
                throttling_burst_limit=config.api_burst,
                tracing_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                metrics_enabled=True,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            ),
        )
        # The stack exports the URL once, as ApiUrl; RestApi's own "Endpoint" output would repeat it.
        self.api.node.try_remove_child("Endpoint")
        self.body_validator = self.api.add_request_validator(
            "BodyValidator", validate_request_body=True, validate_request_parameters=True
        )
        self.json_object = self.api.add_model(
            "JsonObject", content_type="application/json", model_name="JsonObject", schema=JSON_OBJECT_SCHEMA
        )
        self.api.add_gateway_response(
            "BadRequestBody",
            type=apigw.ResponseType.BAD_REQUEST_BODY,
            templates={"application/json": _ERROR_TEMPLATE % "bad_request"},
        )
        self.authorizer: apigw.IAuthorizer | None = None
        self.authorization_scopes: list[str] | None = None
        if config.auth == "jwt":
            self.authorizer = self._build_cognito_authorizer(config)
            self.authorization_scopes = [config.jwt_audience] if config.jwt_audience else None
        integration = apigw.LambdaIntegration(handler, proxy=True)
        self.unauthenticated_methods: list[apigw.Method] = []
        for method, path, json_body in ROUTES:
            if path in INBOX_ROUTES and config.inbox_client_id:
                self._add_unauthenticated(method, path, integration, "", reason=INBOX_PAGE_REASON)
            else:
                self._add_route(method, path, json_body, integration)
        for method, path in SIGNED_ROUTES:
            self._add_unauthenticated(
                method,
                SIGNED_PREFIX + path,
                integration,
                "X-Wait-Signature HMAC-SHA256, keys in Secrets Manager",
            )
        if config.slack_enabled:
            self._add_unauthenticated(
                "POST",
                SLACK_INTERACTIONS_PATH,
                integration,
                "Slack's X-Slack-Signature with the app's signing secret",
            )
        self.web_acl_association: wafv2.CfnWebACLAssociation | None = None
        if config.waf_acl_arn is not None:
            self.web_acl_association = wafv2.CfnWebACLAssociation(
                self,
                "WebAcl",
                resource_arn=self.api.deployment_stage.stage_arn,
                web_acl_arn=config.waf_acl_arn,
            )
        self._acknowledge(config)

    @staticmethod
    def _resource_policy(config: StackConfig) -> iam.PolicyDocument | None:
        """With ``allowed_accounts``: SigV4 callers of this account and those accounts may invoke.

        A REST API with a resource policy refuses a cross-account caller the policy does not name,
        and (explicitly allowed below) lets the routes that authenticate in the Lambda stay open.
        """
        if not config.allowed_accounts:
            return None
        stack_account = cdk.Aws.ACCOUNT_ID
        statements = [
            iam.PolicyStatement(
                sid="SigV4CallersOfTheseAccounts",
                principals=[
                    iam.AccountPrincipal(account) for account in (stack_account, *config.allowed_accounts)
                ],
                actions=["execute-api:Invoke"],
                resources=["execute-api:/*"],
            )
        ]
        # Routes with no authorizer at the gateway: an API with a resource policy serves them only
        # when the policy allows anyone to; their signature is checked in the api Lambda.
        open_routes = [(method, SIGNED_PREFIX + path) for method, path in SIGNED_ROUTES]
        if config.slack_enabled:
            open_routes.append(("POST", SLACK_INTERACTIONS_PATH))
        statements.append(
            iam.PolicyStatement(
                sid="RoutesAuthenticatedInTheFunction",
                principals=[iam.AnyPrincipal()],
                actions=["execute-api:Invoke"],
                resources=[
                    f"execute-api:/{constants.API_STAGE}/{method}{_wildcard_parameters(path)}"
                    for method, path in open_routes
                ],
            )
        )
        return iam.PolicyDocument(statements=statements)

    def _acknowledge(self, config: StackConfig) -> None:
        if config.auth == "iam":
            acknowledge(
                self.api,
                "AwsSolutions-COG4",
                "auth=iam: every method requires SigV4-signed requests (AWS_IAM authorization); a Cognito "
                "authorizer is used instead with -c auth=jwt.",
            )
        if config.waf_acl_arn is None:
            acknowledge(
                self.api.deployment_stage,
                "AwsSolutions-APIG3",
                "Every method is authenticated (SigV4 or Cognito at the gateway; the /signed routes and "
                "Slack's interactions by their signatures in the api Lambda) and the stage is throttled; a "
                "WAF web ACL is a cost decision left to the operator (context waf_acl_arn associates one).",
            )
        if config.api_gateway_account_role:
            role = self.api.node.find_child("CloudWatchRole")
            acknowledge(
                role,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                "API Gateway's account-level logging role: the AWS managed policy is the one AWS documents "
                "for it, and the role is shared by every API of the account and region.",
            )

    @property
    def url(self) -> str:
        return self.api.url

    def _add_route(self, method: str, path: str, json_body: bool, integration: apigw.Integration) -> None:
        resource = self.api.root.resource_for_path(path)
        resource.add_method(
            method,
            integration,
            authorization_type=(
                apigw.AuthorizationType.COGNITO
                if self.authorizer is not None
                else apigw.AuthorizationType.IAM
            ),
            authorizer=self.authorizer,
            authorization_scopes=self.authorization_scopes,
            request_validator=self.body_validator if json_body else None,
            request_models={"application/json": self.json_object} if json_body else None,
        )

    def _add_unauthenticated(
        self, method: str, path: str, integration: apigw.Integration, how: str, *, reason: str | None = None
    ) -> None:
        added = self.api.root.resource_for_path(path).add_method(
            method, integration, authorization_type=apigw.AuthorizationType.NONE
        )
        self.unauthenticated_methods.append(added)
        reason = reason or UNAUTHENTICATED_AT_GATEWAY_REASON.format(how=how)
        acknowledge(added, "AwsSolutions-APIG4", reason)
        acknowledge(added, "AwsSolutions-COG4", reason)

    def _build_cognito_authorizer(self, config: StackConfig) -> apigw.IAuthorizer:
        pool_arn = config.cognito_user_pool_arn or cdk.Stack.of(self).format_arn(
            service="cognito-idp",
            region=config.user_pool_region,
            resource="userpool",
            resource_name=config.user_pool_id,
        )
        pool = cognito.UserPool.from_user_pool_arn(self, "UserPool", pool_arn)
        return apigw.CognitoUserPoolsAuthorizer(
            self,
            "JwtAuthorizer",
            cognito_user_pools=[pool],
            identity_source="method.request.header.Authorization",
        )

"""Web: the SPA from a private S3 bucket through CloudFront (origin access control), SPA routing
by a CloudFront Function, security headers, and the API behind the same distribution under
``/api/*`` (no caching, every viewer header but Host forwarded).

The HTTP API's default ``execute-api`` endpoint stays enabled: with ``disableExecuteApiEndpoint``
API Gateway answers 403 to *every* client of that hostname, CloudFront included, and only a
custom domain name (ACM certificate + DNS) would then reach the API. Instead CloudFront adds
``ORIGIN_HEADER`` with a generated secret (``OriginSecret``, read by CloudFormation through a
dynamic reference, so the value is not in the template) to every ``/api/*`` origin request,
overwriting any viewer header of that name; the API must refuse requests without it, which
closes the WAF bypass through the ``execute-api`` URL (see docs/deploy.md).
"""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.buckets import private_bucket
from infra.nag import acknowledge

API_PATH_PATTERN = "/api/*"
ORIGIN_HEADER = "x-openagents-origin-verify"  # set by CloudFront on every /api/* request

# Viewer-request: a path whose last segment has no file extension is an SPA route. Custom error
# responses would also rewrite the API's own 403/404 answers, so routing is done here instead.
SPA_ROUTER = """\
function handler(event) {
  var request = event.request;
  var last = request.uri.split('/').pop();
  if (last.indexOf('.') === -1) {
    request.uri = '/index.html';
  }
  return request;
}
"""


def content_security_policy() -> str:
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: https:",
            "font-src 'self' data:",
            f"connect-src 'self' https://*.auth.{Aws.REGION}.amazoncognito.com "
            f"https://cognito-idp.{Aws.REGION}.amazonaws.com",
            "frame-ancestors 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "object-src 'none'",
        ]
    )


class Web(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        access_logs: s3.IBucket,
        web_acl_arn: str | None,
    ) -> None:
        super().__init__(scope, id)
        self.bucket = private_bucket(
            self, "Bucket", config=config, access_logs=access_logs, log_prefix="s3/web/"
        )
        self.headers = self._build_headers()
        self.distribution = self._build_distribution(config, access_logs, web_acl_arn)
        self.origin_secret = self._build_origin_secret()

    def _build_origin_secret(self) -> secretsmanager.Secret:
        """The value CloudFront sends in ``ORIGIN_HEADER``; the API reads it to compare."""
        secret = secretsmanager.Secret(
            self,
            "OriginSecret",
            description=f"Open Agents: value of the {ORIGIN_HEADER} header CloudFront sends "
            "to the API",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True
            ),
        )
        acknowledge(
            secret,
            "SMG4",
            "CloudFront resolves the header value only when the stack deploys: a rotated value "
            "would lock CloudFront out until the next deploy; rotate by redeploying",
        )
        return secret

    def _build_headers(self) -> cloudfront.ResponseHeadersPolicy:
        return cloudfront.ResponseHeadersPolicy(
            self,
            "SecurityHeaders",
            comment="Open Agents security headers",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(365),
                    include_subdomains=True,
                    preload=True,
                    override=True,
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.STRICT_ORIGIN_WHEN_CROSS_ORIGIN,
                    override=True,
                ),
                xss_protection=cloudfront.ResponseHeadersXSSProtection(
                    protection=True, mode_block=True, override=True
                ),
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=content_security_policy(), override=True
                ),
            ),
        )

    def _build_distribution(
        self, config: StageConfig, access_logs: s3.IBucket, web_acl_arn: str | None
    ) -> cloudfront.Distribution:
        router = cloudfront.Function(
            self,
            "SpaRouter",
            code=cloudfront.FunctionCode.from_inline(SPA_ROUTER),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment="SPA routes -> /index.html",
        )
        distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"Open Agents ({config.stage})",
            default_root_object="index.html",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers,
                compress=True,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=router, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
            ),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            enable_logging=True,
            log_bucket=access_logs,
            log_file_prefix="cloudfront/",
            web_acl_id=web_acl_arn,
        )
        acknowledge(
            distribution,
            "CFR1",
            "A coding-agent control plane has no country restrictions; WAF rate limits apply",
        )
        acknowledge(
            distribution,
            "CFR4",
            "The default *.cloudfront.net certificate allows TLSv1 viewers; a custom domain "
            "with an ACM certificate (TLSv1.2_2021) is the platform team's to add",
        )
        if web_acl_arn is None:
            acknowledge(
                distribution,
                "CFR2",
                "WAF is a stage toggle (context protection=true or webAclArn); off in this stage",
            )
        return distribution

    def add_api(self, api_domain: str) -> None:
        """Serve the HTTP API under ``/api/*`` on the same origin as the SPA (no CORS), with
        the origin-verify header on every request."""
        self.distribution.add_behavior(
            API_PATH_PATTERN,
            origins.HttpOrigin(
                api_domain,
                protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
                origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
                custom_headers={ORIGIN_HEADER: self.origin_secret.secret_value.unsafe_unwrap()},
            ),
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
            cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            response_headers_policy=self.headers,
            compress=True,
        )

    @property
    def url(self) -> str:
        return f"https://{self.distribution.distribution_domain_name}"

"""Identity: who may call the API. A Cognito user pool and a public SPA client (authorization
code + PKCE, no secret) created here, or an existing OIDC issuer from the stage config. Either
way the API trusts the JWT that API Gateway's authorizer has verified."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from infra.config import StageConfig
from infra.nag import acknowledge


class Identity(Construct):
    def __init__(
        self, scope: Construct, id: str, *, config: StageConfig, app_urls: Sequence[str]
    ) -> None:
        super().__init__(scope, id)
        self.user_pool: cognito.UserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        self.domain: cognito.UserPoolDomain | None = None
        if config.create_user_pool:
            self.authorizer: apigwv2.IHttpRouteAuthorizer = self._build_user_pool(config, app_urls)
        else:
            assert config.jwt_issuer
            self.authorizer = authorizers.HttpJwtAuthorizer(
                "JwtAuthorizer",
                config.jwt_issuer,
                jwt_audience=list(config.jwt_audience),
                identity_source=["$request.header.Authorization"],
            )

    def _build_user_pool(
        self, config: StageConfig, app_urls: Sequence[str]
    ) -> apigwv2.IHttpRouteAuthorizer:
        pool = cognito.UserPool(
            self,
            "UserPool",
            self_sign_up_enabled=False,  # a platform team invites its users
            sign_in_aliases=cognito.SignInAliases(username=True, email=True),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            standard_attributes=cognito.StandardAttributes(
                email=cognito.StandardAttribute(required=True, mutable=True),
                fullname=cognito.StandardAttribute(required=False, mutable=True),
            ),
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            mfa=cognito.Mfa.REQUIRED if config.prod else cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            deletion_protection=config.prod,
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
        )
        callbacks = [url.rstrip("/") + "/" for url in app_urls]
        client = pool.add_client(
            "SpaClient",
            generate_secret=False,  # a browser cannot keep a secret: PKCE instead
            auth_flows=cognito.AuthFlow(user_srp=True),
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[
                    cognito.OAuthScope.OPENID,
                    cognito.OAuthScope.EMAIL,
                    cognito.OAuthScope.PROFILE,
                ],
                callback_urls=callbacks,
                logout_urls=callbacks,
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            access_token_validity=Duration.hours(1),
            id_token_validity=Duration.hours(1),
            refresh_token_validity=Duration.days(30),
        )
        self.domain = pool.add_domain(
            "Domain",
            cognito_domain=cognito.CognitoDomainOptions(
                domain_prefix=f"openagents-{config.stage}-{Aws.ACCOUNT_ID}"
            ),
        )
        self.user_pool, self.client = pool, client
        if not config.prod:
            acknowledge(
                pool,
                "COG2",
                "MFA is optional outside prod (users may enrol TOTP); prod stages require it",
            )
        acknowledge(
            pool,
            "COG8",
            "Essentials plan: invite-only pool (no self sign-up) behind API Gateway throttling; "
            "Plus (threat protection) has no free tier and bills every monthly active user",
        )
        return authorizers.HttpUserPoolAuthorizer(
            "UserPoolAuthorizer",
            pool,
            user_pool_clients=[client],
            identity_source=["$request.header.Authorization"],
        )

    @property
    def hosted_ui_url(self) -> str | None:
        if self.domain is None:
            return None
        return self.domain.base_url()

// Cognito hosted UI, authorization-code flow with PKCE (the SPA client has no secret).
import { credentialsFor, type Credentials } from "./storage";
import type { AppConfig } from "./config";

type AwsConfig = Extract<AppConfig, { mode: "aws" }>;
const PENDING = "openagents.pkce";
const SCOPES = "openid email profile";

function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

function randomString(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

export async function codeChallenge(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

/** The hosted UI URL to send the browser to; the verifier and state wait in sessionStorage. */
export async function authorizeUrl(config: AwsConfig): Promise<string> {
  const verifier = randomString();
  const state = randomString();
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state }));
  const query = new URLSearchParams({
    response_type: "code",
    client_id: config.clientId,
    redirect_uri: config.redirectUri,
    scope: SCOPES,
    state,
    code_challenge: await codeChallenge(verifier),
    code_challenge_method: "S256",
  });
  return `${config.cognitoDomain}/oauth2/authorize?${query}`;
}

/**
 * Finishes a sign-in when the URL carries the hosted UI's `code` and `state`: checks the state,
 * exchanges the code (with the verifier) for tokens and returns the ID token's credentials (its
 * `name` and `email` claims are what the API reads). Null when the URL is not a callback.
 */
export async function completeSignIn(config: AwsConfig, url: URL): Promise<Credentials | null> {
  const code = url.searchParams.get("code");
  const error = url.searchParams.get("error");
  if (error) throw new Error(url.searchParams.get("error_description") ?? error);
  if (!code) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? "null") as {
    verifier: string;
    state: string;
  } | null;
  sessionStorage.removeItem(PENDING);
  if (!pending || pending.state !== url.searchParams.get("state")) {
    throw new Error("The sign-in response does not match this browser's request; sign in again");
  }
  const response = await fetch(`${config.cognitoDomain}/oauth2/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      client_id: config.clientId,
      code,
      redirect_uri: config.redirectUri,
      code_verifier: pending.verifier,
    }),
  });
  if (!response.ok) throw new Error(`Sign-in failed (${response.status})`);
  const tokens = (await response.json()) as { id_token: string };
  return credentialsFor(tokens.id_token, "user");
}

export function logoutUrl(config: AwsConfig): string {
  const query = new URLSearchParams({ client_id: config.clientId, logout_uri: config.redirectUri });
  return `${config.cognitoDomain}/logout?${query}`;
}

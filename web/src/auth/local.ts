// Local sign-in: `POST /api/local/token {user, name?}` mints a token on `openagents dev` only
// (it is not in the OpenAPI schema and answers 404 in AWS mode).
import { ApiError } from "../api/http";
import { credentialsFor, type Credentials } from "./storage";

export async function localSignIn(apiBase: string, user: string, name?: string): Promise<Credentials> {
  const response = await fetch(`${apiBase}/api/local/token`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(name ? { user, name } : { user }),
  });
  if (response.status === 404) {
    throw new ApiError(404, "not_found", "This server has no local sign-in (is it running in AWS mode?)");
  }
  if (!response.ok) {
    const body = (await response.json().catch(() => ({}))) as {
      error?: string;
      code?: string;
      field?: string;
    };
    throw new ApiError(
      response.status,
      body.code ?? "error",
      body.error ?? "Sign-in failed",
      body.field ?? "user",
    );
  }
  const { token } = (await response.json()) as { token: string; user: string };
  return credentialsFor(token, user);
}

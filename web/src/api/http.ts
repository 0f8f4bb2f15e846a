// A tiny fetch wrapper whose paths, bodies and answers are checked against the OpenAPI types.
import type { paths } from "./schema.gen";

type Method = "get" | "post" | "put" | "patch" | "delete";
/** The methods the schema defines on a path (the others are `?: never` there). */
type MethodOf<P extends keyof paths> = {
  [M in Method]: [paths[P][M]] extends [undefined] ? never : M;
}[Method];
type Json<C> = C extends { content: { "application/json": infer T } } ? T : never;
type Responses<O> = O extends { responses: infer R } ? R : never;
type Success<R> = R extends { 200: infer A }
  ? A
  : R extends { 201: infer A }
    ? A
    : R extends { 202: infer A }
      ? A
      : never;

/** The JSON body a successful call answers with. */
type Answer<P extends keyof paths, M extends Method> = Json<Success<Responses<paths[P][M]>>>;
type Body<O> = O extends { requestBody?: infer B } ? NonNullable<B> : never;
/** The JSON body a call takes. */
export type RequestBody<P extends keyof paths, M extends Method> = Json<Body<paths[P][M]>>;
type Query<P extends keyof paths, M extends Method> = paths[P][M] extends {
  parameters: { query?: infer Q };
}
  ? NonNullable<Q>
  : never;

interface CallOptions<P extends keyof paths, M extends Method> {
  /** Values for the `{name}` segments of the path. */
  params?: Record<string, string>;
  query?: Query<P, M>;
  body?: RequestBody<P, M>;
  /** Aborts the request (a long poll no longer wanted gives its connection back). */
  signal?: AbortSignal;
}

/** An error answer of the API: `{error, code, field}` plus the status and `Retry-After`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field: string | null = null,
    /** Seconds to wait before retrying, from `Retry-After` (seconds or an HTTP date). */
    readonly retryAfter: number | null = null,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds));
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000));
}

export function fillPath(path: string, params: Record<string, string> = {}): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`missing path parameter ${name}`);
    return encodeURIComponent(value);
  });
}

function queryString(query: object | undefined): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

async function toError(response: Response): Promise<ApiError> {
  const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
  try {
    const body = (await response.json()) as { error?: string; code?: string; field?: string | null };
    return new ApiError(
      response.status,
      body.code ?? "error",
      body.error ?? response.statusText,
      body.field ?? null,
      retryAfter,
    );
  } catch {
    return new ApiError(
      response.status,
      "error",
      response.statusText || `HTTP ${response.status}`,
      null,
      retryAfter,
    );
  }
}

interface HttpOptions {
  /** Origin of the API ("" = same origin). */
  base: string;
  token: () => string | null;
  /** Called on any 401 (the token expired or was revoked). */
  onUnauthorized?: () => void;
  fetch?: typeof fetch;
}

export type Call = (<P extends keyof paths, M extends MethodOf<P>>(
  method: M,
  path: P,
  options?: CallOptions<P, M>,
) => Promise<Answer<P, M>>) & { raw?: RawCall };

/** A request whose body or answer is bytes (attachments): authorised as `Call` is, an error
 * answer thrown as an `ApiError`; the response is handed back as it came. */
export type RawCall = (
  method: "get" | "post",
  path: string,
  options?: { body?: Blob; contentType?: string; query?: Record<string, string> },
) => Promise<Response>;

export function createCall({ base, token, onUnauthorized, fetch: doFetch = fetch }: HttpOptions): Call {
  const raw: RawCall = async (method, path, options = {}) => {
    const headers: Record<string, string> = {};
    const bearer = token();
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    if (options.body !== undefined)
      headers["content-type"] = options.contentType || "application/octet-stream";
    const response = await doFetch(base + path + queryString(options.query), {
      method: method.toUpperCase(),
      headers,
      body: options.body,
    });
    if (!response.ok) {
      if (response.status === 401) onUnauthorized?.();
      throw await toError(response);
    }
    return response;
  };
  const call: Call = async (method, path, options = {}) => {
    const headers: Record<string, string> = { accept: "application/json" };
    const bearer = token();
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const url = base + fillPath(path, options.params) + queryString(options.query as object | undefined);
    const response = await doFetch(url, {
      method: method.toUpperCase(),
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
    });
    if (!response.ok) {
      if (response.status === 401) onUnauthorized?.();
      throw await toError(response);
    }
    if (response.status === 204) return null; // "nothing" (the chat stream without a run)
    return response.json();
  };
  call.raw = raw;
  return call;
}
